"""Files for CI systems and dashboards: a Markdown summary, JUnit XML and OpenMetrics text of a nightly, a
pre-merge check or a bisection, each written from one `CiReport` (bench.ci.facts) by a module of its own."""

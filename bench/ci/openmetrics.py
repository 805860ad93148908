"""OpenMetrics text of a job's figures, for Prometheus (node-exporter's textfile collector reads it from a
`*.prom` file; a push gateway takes it over HTTP). Written by prometheus-client's own exposition code.

Families (all gauges, no timestamps: the textfile collector refuses them):
- `hilbench_figure{device,kind,session,metric,clock,unit,run_kind,build}`: each figure of the job's runs;
- `hilbench_figure_baseline{...}`: the mean of the baseline window a judged figure was held against;
- `hilbench_regression{...}`: 1 when the judged figure is a regression, else 0;
- `hilbench_drift_pct{...}`: for a regression that is a drift, its cumulative change since its first night, percent;
- `hilbench_alert_metrics{alert,device,state}`: each alert the job opened, joined or fixed (one per cause on a
  device), the number of metrics it lists; `hilbench_alert_failing{...}`: 1 when it makes the job exit 1;
- `hilbench_job_exit_code{command}` and `hilbench_job_started_seconds{command}` (Unix time)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from bench.ci.facts import BASELINE, CiReport, Figure
from bench.results.verdict import REGRESSION, Verdict

LABELS = ("device", "kind", "session", "metric", "clock", "unit", "run_kind", "build")


def _labels(f: Figure) -> list[str]:
    return [f.device, f.kind, f.session, f.metric, f.clock, f.unit, f.run_kind, f.build]


class _Job(Collector):
    """The report's families, collected once when the text is generated."""

    def __init__(self, report: CiReport) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        figures = GaugeMetricFamily(
            "hilbench_figure", "a figure of a bench run (bench.measure.catalogue)", labels=LABELS
        )
        for f in _distinct(self.report.figures):
            figures.add_metric(_labels(f), f.value)
        yield figures
        baseline = GaugeMetricFamily(
            "hilbench_figure_baseline", "mean of the baseline window a figure was judged against", labels=LABELS
        )
        regression = GaugeMetricFamily("hilbench_regression", "1 when the judged figure is a regression", labels=LABELS)
        drift = GaugeMetricFamily(
            "hilbench_drift_pct", "a drift's cumulative change since its first night, percent", labels=LABELS
        )
        for f, verdict in _distinct_judged(self.report):
            if verdict.baseline_value is not None:
                baseline.add_metric(_labels(f), verdict.baseline_value)
            regression.add_metric(_labels(f), 1.0 if verdict.status == REGRESSION else 0.0)
            if verdict.status == REGRESSION and verdict.is_drift and verdict.effect_pct is not None:
                drift.add_metric(_labels(f), verdict.effect_pct)
        yield baseline
        yield regression
        yield drift
        yield from self._alerts()
        job = [self.report.job]
        code = GaugeMetricFamily(
            "hilbench_job_exit_code",
            "the job's exit code (0 pass, 1 regression or failure, 2 usage, 3 infrastructure)",
            labels=["command"],
        )
        code.add_metric(job, float(self.report.exit_code))
        yield code
        if self.report.started is not None:
            started = GaugeMetricFamily(
                "hilbench_job_started_seconds", "when the job started (Unix time)", labels=["command"]
            )
            started.add_metric(job, self.report.started.timestamp())
            yield started

    def _alerts(self) -> Iterator[Metric]:
        labels = ["alert", "device", "state"]
        count = GaugeMetricFamily("hilbench_alert_metrics", "the metrics an alert (one cause) lists", labels=labels)
        failing = GaugeMetricFamily("hilbench_alert_failing", "1 when the alert makes the job exit 1", labels=labels)
        for a in self.report.alerts:
            count.add_metric([str(a.id), a.device, a.state], float(a.metrics))
            failing.add_metric([str(a.id), a.device, a.state], 1.0 if a.failing else 0.0)
        yield count
        yield failing


def _distinct(figures: Iterable[Figure]) -> Iterator[Figure]:
    """`figures` with one per label set (the first): OpenMetrics takes no two samples with the same labels,
    and a job that ran (two sessions sharing an id got past its checks) still writes its file."""
    seen: set[tuple[str, ...]] = set()
    for f in figures:
        key = tuple(_labels(f))
        if key not in seen:
            seen.add(key)
            yield f


def _judged_figures(report: CiReport) -> Iterable[tuple[Figure, Verdict]]:
    """(the figure a verdict judged, the verdict), for the verdicts whose figure is among the report's."""
    by_key = {(f.device, f.session, f.metric): f for f in report.figures if not f.run_kind.endswith(BASELINE)}
    for j in report.judged:
        found = by_key.get((j.verdict.device, j.session, j.measurement))
        if found is not None:
            yield found, j.verdict


def _distinct_judged(report: CiReport) -> Iterator[tuple[Figure, Verdict]]:
    """`_judged_figures`, one per label set (the first), as `_distinct`."""
    seen: set[tuple[str, ...]] = set()
    for f, verdict in _judged_figures(report):
        key = tuple(_labels(f))
        if key not in seen:
            seen.add(key)
            yield f, verdict


def openmetrics_text(report: CiReport) -> str:
    """The report's figures as OpenMetrics text, ending with `# EOF`."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Job(report))
    return generate_latest(registry).decode()

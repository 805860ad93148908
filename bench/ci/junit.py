"""JUnit XML of a job's test cases (one per device, session and judged metric): a regression is a failure, an
inconclusive or unjudged metric is skipped with its reason, a device the bench could not run is an error. The
schema is the one GitLab's `artifacts:reports:junit`, Jenkins and GitHub test reporters read."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

from bench.ci.facts import ERROR, FAILED, SKIPPED, Case, CiReport


def junit_xml(report: CiReport) -> str:
    """`<testsuites>` with one `<testsuite>` per suite of the report's cases."""
    root = ET.Element("testsuites", name=f"hilbench {report.job}")
    suites: dict[str, list[Case]] = {}
    for case in report.cases:
        suites.setdefault(case.suite, []).append(case)
    for name, cases in suites.items():
        counts = Counter(c.status for c in cases)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=name,
            tests=str(len(cases)),
            failures=str(counts[FAILED]),
            errors=str(counts[ERROR]),
            skipped=str(counts[SKIPPED]),
            time=f"{sum(c.seconds for c in cases):.3f}",
        )
        if report.started is not None:
            suite.set("timestamp", report.started.replace(microsecond=0).isoformat())
        for case in cases:
            element = ET.SubElement(
                suite, "testcase", classname=case.classname, name=case.name, time=f"{case.seconds:.3f}"
            )
            if case.status == FAILED:
                ET.SubElement(element, "failure", message=case.message, type="regression").text = case.message
            elif case.status == ERROR:
                ET.SubElement(element, "error", message=case.message, type="infrastructure").text = case.message
            elif case.status == SKIPPED:
                ET.SubElement(element, "skipped", message=case.message)
            elif case.message:
                ET.SubElement(element, "system-out").text = case.message
    for counter in ("tests", "failures", "errors", "skipped"):
        root.set(counter, str(sum(int(s.get(counter, "0")) for s in root)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

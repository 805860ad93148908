"""record_measurement in a real pytest run: JUnit XML properties and pytest-html tables with inline SVG."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import REPO

MEASURING_TESTS = """
import random

def test_latency(record_measurement):
    rng = random.Random(1)
    samples = [rng.lognormvariate(3.0, 0.25) for _ in range(500)]
    record_measurement("decision_latency_p99", sorted(samples)[494], "ms", samples=samples)
    record_measurement("fps", 57.8, "FPS")

def test_bad_unit(record_measurement):
    record_measurement("fps", 57.8, "")
"""


@pytest.mark.e2e
def test_measurements_reach_junit_xml_and_pytest_html(tmp_path: Path) -> None:
    (tmp_path / "test_measuring.py").write_text(MEASURING_TESTS)
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_measuring.py", f"--junitxml={junit}", f"--html={html}",
         "--self-contained-html", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # test_bad_unit fails
    cases = {c.get("name"): c for c in ElementTree.parse(junit).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_latency"].iter("property")}
    assert props["fps [FPS]"] == "57.8"
    assert 25 < float(props["decision_latency_p99 [ms]"]) < 40
    failure = cases["test_bad_unit"].find("failure")
    assert failure is not None and "unit must be a non-empty string" in failure.get("message")
    extras = html_extras(html)["test_measuring.py::test_latency"]
    assert "hilbench-measurements" in extras and "decision_latency_p99" in extras and "57.8 FPS" in extras
    assert extras.count("<svg xmlns") == 1 and "CDF of 500 samples" in extras  # only the measurement with samples


def html_extras(page: Path) -> dict[str, str]:
    """test id -> the HTML extras pytest-html 4 keeps in its data-jsonblob attribute."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page.read_text()).group(1)
    tests = json.loads(unescape(blob))["tests"]
    return {tid: "".join(e["content"] for run in runs for e in run["extras"]) for tid, runs in tests.items()}


@pytest.mark.e2e
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_measurements_reach_a_metrics_file_prometheus_reads(tmp_path: Path, workers: list[str]) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    (tmp_path / "test_measuring.py").write_text(MEASURING_TESTS)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "test_measuring.py", "--metrics", "m.prom", "-p", "no:cacheprovider", "-q",
         *workers],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    files = sorted(tmp_path.glob("m*.prom"))
    assert [f.name for f in files] == (["m.gw0.prom", "m.gw1.prom"] if workers else ["m.prom"])
    samples = {
        (s.labels["session"], s.labels["metric"]): s
        for f in files
        for family in text_string_to_metric_families(f.read_text())
        if family.name == "hilbench_figure"
        for s in family.samples
    }
    fps = samples["test_measuring.py::test_latency", "fps"]
    assert fps.value == 57.8 and fps.labels["unit"] == "FPS" and fps.labels["run_kind"] == "pytest"
    assert fps.labels["clock"] == "device"  # the catalogue's clock for a figure of that name
    assert 25 < samples["test_measuring.py::test_latency", "decision_latency_p99"].value < 40

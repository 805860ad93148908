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

"""The pytest plugin shows the nightly's open alerts of the devices a test session ran on: in the terminal summary
and as JUnit XML properties of each test on such a device."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from bench.alerts.triage import acknowledge
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO
from tests.nightly_history import store_night

DEVICE_TESTS = """
import pytest

@pytest.mark.parametrize("device", ["c6-a", "orin-1"])
def test_on(device):
    pass
"""


def test_a_device_tests_report_lists_its_devices_open_alerts(tmp_path: Path) -> None:
    rules, rng = load_thresholds(), np.random.default_rng(9)
    store_path = tmp_path / "results.sqlite"
    with open_store(store_path) as store:
        for _ in range(6):
            store_night(store, rules, rng)
        store_night(store, rules, rng, slower={"c6-a": 1.4}, models={"c6-a": "1" * 64})
        store_night(store, rules, rng, slower={"c6-a": 1.4, "orin-1": 1.3}, models={"c6-a": "1" * 64})
        acknowledge(store, 1, "maria", "v2 is heavier")
    (tmp_path / "test_devices.py").write_text(DEVICE_TESTS)
    argv = [sys.executable, "-m", "pytest", "test_devices.py", "--results", str(store_path), "-p", "no:cacheprovider",
            "-p", "no:xdist", "-o", "addopts=", "--junitxml", "junit.xml", "-q"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "COLUMNS": "80", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = done.stdout.split("hilbench alerts on the tested devices", 1)[1]
    lines = [line for line in summary.splitlines() if line.startswith("#")]
    assert lines[0].startswith("#2 orin-1") and "untriaged" in lines[0]  # untriaged first
    assert lines[1].startswith("#1 c6-a") and "acknowledged" in lines[1]
    assert all(len(line) <= 80 for line in lines)
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    props = {name: {p.get("name"): p.get("value") for p in c.iter("property")} for name, c in cases.items()}
    assert props["test_on[c6-a]"]["hilbench device"] == "c6-a"
    assert props["test_on[c6-a]"]["hilbench alerts"].startswith("#1 acknowledged inference time P50")
    assert props["test_on[orin-1]"]["hilbench alerts"].startswith("#2 untriaged")


def test_a_session_without_a_store_neither_creates_one_nor_lists_alerts(tmp_path: Path) -> None:
    (tmp_path / "test_devices.py").write_text(DEVICE_TESTS)
    missing = tmp_path / "none.sqlite"
    argv = [sys.executable, "-m", "pytest", "test_devices.py", "--results", str(missing), "-p", "no:cacheprovider",
            "-p", "no:xdist", "-o", "addopts=", "-q"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0 and "hilbench alerts" not in done.stdout
    assert not missing.exists()

"""`hilbench baseline` and `hilbench report` as a user runs them, on a stored history."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, hilbench
from tests.stored_runs import build_store


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # rich must not wrap the lines the tests read
    return subprocess.run(hilbench(*args), cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.e2e
def test_baseline_then_report_gives_verdicts_json_and_exit_codes(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    last = build_store(store, runs=7, devices=2, frames=2000)
    out = tmp_path / "reports"

    done = run("baseline", "set", "6", "--name", "nightly", "--results", str(store))
    assert done.returncode == 0 and "baseline nightly = run 6" in done.stdout, done.stderr
    newest = run("baseline", "set", "latest", "--name", "newest", "--results", str(store), "--json")
    assert json.loads(newest.stdout)["run_id"] == last
    listed = json.loads(run("baseline", "list", "--results", str(store), "--json").stdout)
    assert [(b["name"], b["run_id"]) for b in listed] == [("default", 1), ("newest", last), ("nightly", 6)]

    report = run("report", "--baseline", "nightly", "--results", str(store), "--out", str(out), "--json")
    assert report.returncode == 1, report.stderr  # the latest run regressed on orin-1
    data = json.loads(report.stdout)
    assert data["run"]["run_id"] == str(last) and data["baseline"]["run_id"] == "6"
    assert data["outcome"]["regressed_devices"] == ["orin-1"]
    assert Path(data["page"]).exists() and (out / "latest.html").exists() and (out / "index.html").exists()

    regressed = run("report", "--results", str(store), "--out", str(out))
    assert regressed.returncode == 1 and "regression orin-1 decision latency P99: +" in regressed.stdout
    assert f"since run {last}" in regressed.stdout

    human = run("report", "1", "--results", str(store), "--out", str(out))
    assert human.returncode == 0 and "collecting baseline (0 of 5)" in human.stdout

    compare = run("report", "2", "--compare", "1", "--results", str(store), "--out", str(out))
    assert compare.returncode == 0 and "compare/2-vs-1.html" in compare.stdout.replace("\n", "")


@pytest.mark.e2e
def test_report_errors_name_what_is_wrong(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    build_store(store, runs=1, devices=1, frames=500)
    missing = run("report", "7", "--results", str(store), "--out", str(tmp_path))
    assert missing.returncode == 2 and "no run 7" in missing.stderr and "Traceback" not in missing.stderr
    bad = run("report", "abc", "--results", str(store))
    assert bad.returncode == 2 and "run 'abc'" in bad.stderr
    thresholds = tmp_path / "t.toml"
    thresholds.write_text("[metrics.x]\nworse = 'higher'\n")
    broken = run("report", "--results", str(store), "--thresholds", str(thresholds), "--out", str(tmp_path))
    assert broken.returncode == 2 and f"{thresholds}: metrics.x.measurement is missing" in broken.stderr
    empty = run("report", "--results", str(tmp_path / "empty.sqlite"), "--out", str(tmp_path))
    assert empty.returncode == 2 and "no runs yet" in empty.stderr

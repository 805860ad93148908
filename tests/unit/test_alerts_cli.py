"""`hilbench alerts` on a synthetic history (subprocesses, as a user runs it), the nightly's exit code and summary
with alerts, and the run page and history page that show them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.alerts import table
from bench.alerts.night import night_alerts
from bench.alerts.triage import acknowledge
from bench.core.errors import ExitCode
from bench.nightly.orchestration import NightlyResult
from bench.nightly.publish import PublishedRun
from bench.report.html import write_index
from bench.report.nights import load_grids
from bench.report.publish import publish_run
from bench.results.evidence import stored_verdicts
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.conftest import REPO, hilbench, nightly_summary
from tests.nightly_history import store_history

RULES = load_thresholds()
BAD = "1" * 64


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """6 good nights, 2 with a step on c6-a, one where orin-1 steps on the same model: alerts #1 and #2."""
    path = tmp_path_factory.mktemp("alerts") / "results.sqlite"
    steps = [{"slower": {"c6-a": 1.4}, "models": {"c6-a": BAD}}] * 2
    both = {"slower": {"c6-a": 1.4, "orin-1": 1.3}, "models": {"c6-a": BAD, "orin-1": BAD}}
    return path, store_history(path, RULES, [*steps, both])


def _run(path: Path, *args: str) -> subprocess.CompletedProcess:
    argv = hilbench("alerts", *args, "--results", str(path))
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, env={"COLUMNS": "80"})


def test_the_alerts_commands_triage_and_refuse_wrong_input(history: tuple[Path, list[int]], tmp_path: Path) -> None:
    source, ids = history
    path = tmp_path / "r.sqlite"
    path.write_bytes(source.read_bytes())
    listed = _run(path, "list")
    assert listed.returncode == 0, listed.stderr
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())
    assert "untriaged" in listed.stdout and "same change as #1?" in listed.stdout
    shown = _run(path, "show", "1")
    assert shown.returncode == 0 and all(len(line) <= 80 for line in shown.stdout.splitlines())
    assert "change: model sha256 00000000… -> 11111111…" in shown.stdout and "hilbench bisect" in shown.stdout
    acked = _run(path, "ack", "1", "--owner", "maria", "--note", "v7 is heavier", "--link", "https://b.example/1")
    assert acked.returncode == 0 and "acknowledged; owner maria" in acked.stdout
    assert _run(path, "downstream", "2", "--of", "1").returncode == 0
    doc = json.loads(_run(path, "show", "2", "--json").stdout)
    assert doc["state"] == "downstream" and doc["of_alert"] == 1
    assert [e["event"] for e in doc["events"]] == ["opened", "downstream"]
    assert [a["id"] for a in json.loads(_run(path, "list", "--json", "--state", "acknowledged").stdout)] == [1]
    assert _run(path, "invalid", "2", "--reason", "the lab's USB hub").returncode == 0
    assert _run(path, "fix", "1", "--run", str(ids[-1] + 0)).returncode == 0  # the last night is after its first
    wrong = {
        "unknown id": (["show", "99"], "no alert 99"),
        "not a number": (["ack", "x1", "--owner", "o", "--note", "n"], "alert ids are numbers"),
        "missing --owner": (["ack", "1", "--note", "n"], "the following arguments are required: --owner"),
        "fixed cannot be acked": (["ack", "1", "--owner", "o", "--note", "n"], "alert 1 is fixed"),
        "downstream of itself": (["downstream", "2", "--of", "2"], "names the alert itself"),
        "unknown run": (["fix", "2", "--run", "9999"], "no run 9999"),
        "empty reason": (["invalid", "2", "--reason", " "], "--reason is empty"),
    }
    for case, (args, message) in wrong.items():
        done = _run(path, *args)
        assert done.returncode == ExitCode.USAGE, case
        assert message in done.stderr and "Traceback" not in done.stderr, (case, done.stderr)


def test_the_nightly_exits_on_untriaged_alerts_only(history: tuple[Path, list[int]], tmp_path: Path) -> None:
    source, ids = history
    path = tmp_path / "r.sqlite"
    path.write_bytes(source.read_bytes())
    with open_store(path) as store:
        verdicts = stored_verdicts(store, ids[-1])
        result = NightlyResult("20261204-020000", tmp_path / "logs", [])
        result.runs = [PublishedRun("combat", ids[-1], "window", None, verdicts)]
        result.alerts = night_alerts(store, [ids[-1]], RULES.alerts)
        assert result.exit_code == ExitCode.FAILED  # two untriaged alerts
        text = nightly_summary(result)
        assert "alerts: 1 new, 1 known, 0 fixed; 2 untriaged fail the night" in text
        assert "NEW #2 orin-1" in text and "known #1 c6-a" in text
        assert "hilbench alerts downstream 2 --of 1" in text
        mine = [line for line in text.splitlines() if line.startswith(("alerts:", "  NEW", "  known", "    down"))]
        assert len(mine) == 4 and all(len(line) <= 80 for line in mine)
        acknowledge(store, 1, "maria", "v7 is heavier")
        acknowledge(store, 2, "maria", "same model")
        result.alerts = night_alerts(store, [ids[-1]], RULES.alerts)
        assert result.exit_code == ExitCode.OK  # the regressions are owned: the night passes
        assert result.to_json()["alerts"]["known"][0]["state"] == "acknowledged"


def test_the_run_page_and_the_history_page_show_alerts(history: tuple[Path, list[int]], tmp_path: Path) -> None:
    source, ids = history
    path = tmp_path / "r.sqlite"
    path.write_bytes(source.read_bytes())
    with open_store(path) as store:
        acknowledge(store, 1, "maria", "v7 is heavier", "https://bugs.example/7")
        page = publish_run(store, ids[-1], reports_dir=tmp_path / "reports").page
        grids = load_grids(store, RULES)
        assert table.get(store, 2).state == "untriaged"
    html = page.read_text()
    assert "Alerts: 1 new, 1 known; 1 fails the night (untriaged)" in html
    assert "hilbench alerts downstream 2 --of 1" in html and 'href="https://bugs.example/7"' in html
    index = write_index(tmp_path / "reports", [], grids).read_text()
    assert "alert #1 acknowledged · maria" in index and "alert #2 untriaged" in index
    assert "Open alerts (2)" in index

"""reports/index.html as the lab's morning view: per session a grid of device x judged metric, each cell the
device's stored figure over the last nights with regressions, drifts, failures and fingerprint changes marked."""

from __future__ import annotations

import re
from pathlib import Path

from bench.report.html import write_index
from bench.report.nights import load_grids
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.nightly_history import Plan, write_history

RULES = load_thresholds()


def test_the_index_shows_each_sessions_grid_with_its_marks(tmp_path: Path) -> None:
    plan = Plan(nights=18, creep_from=8, step_night=12, failed={14: "c6-a"}, model_every=6)
    with open_store(tmp_path / "results.sqlite") as store:
        ids = write_history(store, RULES, plan, ("c6-a", "orin-1", "pi5-1"))
        grids = load_grids(store, RULES, nights=15)
    (grid,) = grids
    assert grid.session == "combat" and [n for n, _ in grid.nights] == ids[-15:]  # the last N nights only
    assert grid.devices == ["c6-a", "orin-1", "pi5-1"]
    creep = grid.cells[("orin-1", "inference_p50")]
    assert creep.drifts and all(p.drift_since == creep.drifts[0].drift_since for p in creep.drifts)
    assert ids[7] <= creep.drifts[0].drift_since <= ids[10]  # the creep began on night 8 (0-based)
    assert grid.cells[("c6-a", "memory_peak")].points[12 - 3].status == "regression"
    assert grid.cells[("pi5-1", "latency_p50")].not_applicable  # bench clock on an icount guest
    (tmp_path / "reports").mkdir()
    page = write_index(tmp_path / "reports", [], grids).read_text()
    assert "<h2>combat <small>15 nights" in page
    assert page.count('class="spark"') == len(grid.cells) - 2  # the n/a cells (pi5-1 latency P50, P99) have none
    assert f'href="runs/{ids[-1]}.html"' in page  # every point links to its run
    assert f"drift since run {creep.drifts[0].drift_since}: drift: inference time P50" in page  # change point line
    assert 'stroke="#c62828" stroke-width="1.8"' in page  # drift nights are red rings
    assert re.search(r"<title>run \d+: c6-a failed: link lost mid-replay</title>", page)  # the failed night's cross
    assert "model sha256 00000000… -&gt; " in page  # a fingerprint change as a tick on the time axis
    assert "n/a: not on this device" in page

"""The nightly's terminal summary stays readable in an 80-column terminal."""

from __future__ import annotations

from pathlib import Path

from bench.commands.nightly import _print
from bench.core.console import out
from bench.nightly.orchestration import NightlyResult
from bench.nightly.publish import PublishedRun
from bench.nightly.stages import DeviceOutcome, StageResult
from bench.results.thresholds import load_thresholds
from bench.results.verdict import Window, confirmed, judge
from tests.conftest import nightly_summary

DEVICES = ("c6-a", "c6-b", "orin-1", "pi5-1", "switch-1")


def test_summary_fits_80_columns_with_the_whole_fleet() -> None:
    long = "firmware: ESP32-C6 60:55:f9:c6:00:01: wrote 464 bytes (247 compressed), verified; agent: 16 sent"
    stages = [
        StageResult(name, 1.0, {d: DeviceOutcome(True, long) for d in DEVICES})
        for name in ("check", "flash", "replay", "confirm", "update", "faults")
    ]
    stages[1].devices["orin-1"] = DeviceOutcome(False, long)
    rule = load_thresholds().rule("first_frame_ms")
    window = Window((1, 2, 3, 4, 5), (100.0, 101.0, 99.0, 100.5, 99.5), 5)
    regression = confirmed(judge(rule, "c6-a", 120.0, 10, window, "ms"), judge(rule, "c6-a", 121.0, 10, window, "ms"))
    result = NightlyResult("20261201-020000", Path("reports/nightly-20261201-020000"), stages)
    result.runs = [PublishedRun("combat-0000", 7, "window", Path("reports/runs/7.html"), [regression])]
    text = nightly_summary(result)
    table = [line for line in text.splitlines() if line.split(" ", 1)[0] in (*DEVICES, "device")]  # header + rows
    assert len(table) >= len(DEVICES) + 1 and all(len(line) <= 80 and "…" not in line for line in table)
    assert "FAILED" in text and "REGRESSION c6-a first-frame time" in text


def test_a_session_still_collecting_its_baseline_is_not_called_free_of_regressions() -> None:
    rule = load_thresholds().rule("first_frame_ms")
    collecting = judge(rule, "pi5-1", 100.0, 10, Window((1, 2), (100.0, 101.0), 5), "ms")
    result = NightlyResult("20261201-020000", Path("reports/nightly-20261201-020000"), [])
    result.runs = [PublishedRun("combat-0000", 7, "window", None, [collecting], collecting.reason)]
    with out.capture() as captured:
        _print(result)
    text = captured.get()
    assert "combat-0000 (run 7): not judged (collecting baseline (2 of 5))" in text
    assert "no regression" not in text

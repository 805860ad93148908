"""The report's frame trace and the run's measurements are one computation: the trace read back from the store
gives the FPS and jitter that bench.measure.frames computes from the same frame records."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import numpy as np
import pytest

from bench.measure.frames import frame_timing
from bench.report.view_adapter import load_run
from bench.store.results import open_store
from tests.measured_runs import Shape, records


def test_the_report_trace_gives_the_measured_fps_and_jitter(tmp_path: Path) -> None:
    recs, _ = records(Shape(30, 9.5, 1e9, ran=0.8), 600, np.random.default_rng(1))
    recs[7] = dataclasses.replace(recs[7], due=None)  # a frame without a schedule: no deviation, still a frame time
    with open_store(tmp_path / "r.sqlite") as store:
        run = store.runs.begin_run("nightly", bench="t", session="s")
        store.runs.add_device(run, "d", "esp32c6")
        store.frames.add_frames(run, "d", recs)
        store.runs.finish_run(run, "ok")
        view = load_run(store, run)
    trace = view.devices["d"].frames
    timing = frame_timing(recs)
    assert trace is not None and len(trace) == timing.inferences < len(recs)
    intervals_us = trace.interval_ms[1:] * 1000.0
    assert 1e6 / intervals_us.mean() == pytest.approx(timing.fps, rel=1e-9)
    deviations = trace.deviation_us[~np.isnan(trace.deviation_us)]
    assert deviations.size == timing.inferences - (1 if recs[7].ran else 0)
    assert statistics.pstdev(deviations.tolist()) == pytest.approx(timing.jitter_std_us, rel=1e-9)

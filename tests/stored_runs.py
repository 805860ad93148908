"""Stored runs shaped like replay runs (frame records, HDR histograms, measurements, faults): measured by
bench.measure and written through the results store's API, for report tests and the render benchmark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from bench.measure.faults import FaultEvent
from bench.results.baseline import set_baseline
from bench.store.results import ResultStore, open_store
from tests.measured_runs import Shape, measured, records

DEVICES = (("c6-a", "esp32c6", 20, 24.6), ("orin-1", "jetson-orin-nx", 60, 3.1), ("pi5-1", "pi5", 30, 9.5),
           ("switch-1", "switch-arm64", 30, 29.0))  # fmt: skip


def night_start(first: dt.datetime | None, night: int) -> str | None:
    """When night `night` (0-based) of a history from `first` starts, as the store writes times (None: now)."""
    return None if first is None else (first + dt.timedelta(days=night)).isoformat(timespec="milliseconds")


def write_device(store: ResultStore, run_id: int, name: str, kind: str, fps: int, latency_ms: float,
                 frames: int, rng: np.random.Generator, factor: float) -> None:  # fmt: skip
    """One device's records in one run, measured and stored as a replay run stores them (bench.measure, then the
    store's API)."""
    store.runs.add_device(run_id, name, kind)
    shape = Shape(fps, latency_ms, 1.42e9, factor=factor, cold_starts=10, memory_spread=0.0)
    recs, sent_ns = records(shape, frames, rng)
    store.frames.add_frames(run_id, name, recs)
    result = measured(shape, recs, sent_ns, rng)
    store.measures.add_histograms(run_id, name, result.histograms)
    store.measures.add_measurements(run_id, name, result.measurements)
    switch = recs[frames // 2].t0
    late = switch + 1_200_000
    fault = FaultEvent("oom", "new model ran out of memory", 8, 7, switch, late, None, 1200.0, 412_000, "")
    store.measures.add_faults(run_id, name, [fault])


def build_store(
    path: Path, runs: int, devices: int, frames: int, *, regress: str = "orin-1", regressed_runs: int = 1,
    first_night: dt.datetime | None = None,
) -> int:  # fmt: skip
    """Write `runs` runs of session "synthetic" (baseline "default" = the first; the last `regressed_runs` have a
    +25% latency regression on `regress`, and are not accepted into later baselines); return the last run's id.
    With `first_night` the runs start a day apart from it, else now."""
    rng = np.random.default_rng(0)
    last = 0
    with open_store(path) as store:
        for r in range(runs):
            last = store.runs.begin_run("nightly", bench="synthetic", session="synthetic",
                                   started_at=night_start(first_night, r))  # fmt: skip
            for name, kind, fps, latency in DEVICES[:devices]:
                factor = 1.25 if (r >= runs - regressed_runs and name == regress) else 1.0
                write_device(store, last, name, kind, fps, latency, frames, rng, factor)
                store.windows.accept(last, name, factor == 1.0, "" if factor == 1.0 else "regressed")
            store.runs.finish_run(last, "ok")
            if r == 0:
                set_baseline(store, last)
    return last

"""Stored runs shaped like replay runs (frame records, HDR histograms, measurements, faults), written through
the results store's API: for report tests and the render benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.measure.measurement import Measurement
from bench.results.baseline import set_baseline
from bench.results.evidence import accept
from bench.results.store import ResultStore, open_store

DEVICES = (("c6-a", "esp32c6", 20, 24.6), ("orin-1", "jetson-orin-nx", 60, 3.1), ("pi5-1", "pi5", 30, 9.5),
           ("switch-1", "switch-arm64", 30, 29.0))  # fmt: skip


def histogram(name: str, unit: str, values: np.ndarray) -> Histogram:
    """An HDR histogram of `values`, recorded value by distinct value (fast for large arrays)."""
    hist = Histogram(name, unit)
    distinct, counts = np.unique(np.round(values).astype(np.int64), return_counts=True)
    for v, c in zip(distinct.tolist(), counts.tolist(), strict=True):
        hist.hdr.record_value(max(v, 0), c)
    return hist


def write_device(store: ResultStore, run_id: int, name: str, kind: str, fps: int, latency_ms: float,
                 frames: int, rng: np.random.Generator, factor: float) -> None:  # fmt: skip
    """One device's records in one run, shaped like a replay run's."""
    store.add_device(run_id, name, kind)
    period_us = 1e6 / fps
    due = (np.arange(frames) * period_us).astype(np.int64)
    t0 = due + np.abs(rng.normal(0, 1240, frames)).astype(np.int64)
    inference = rng.lognormal(np.log(latency_ms * 600), 0.2, frames) * factor
    t1 = t0 + inference.astype(np.int64)
    ran = rng.random(frames) > 0.05
    rows = zip(
        [run_id] * frames, [name] * frames, range(frames), due.tolist(), due.tolist(), ran.astype(int).tolist(),
        t0.tolist(), t1.tolist(), [1] * frames, [0.5] * frames, range(frames), [0] * frames, [0] * frames,
        [0] * frames, [7 if i < frames // 2 else 8 for i in range(frames)], (t1 * 1000 + 5_000_000).tolist(),
        strict=True,
    )  # fmt: skip
    with store._tx():
        store.db.executemany("INSERT INTO frames VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    decision_us = rng.lognormal(np.log(latency_ms * 1000), 0.25, int(ran.sum())) * factor
    ft = np.diff(t0[ran]).astype(float)
    dev = np.abs(t0[ran] - due[ran]).astype(float)
    hists = [histogram("decision_latency", "us", decision_us), histogram("inference_latency", "us", inference[ran]),
             histogram("frame_time", "us", ft), histogram("frame_deviation", "us", dev)]  # fmt: skip
    store.add_histograms(run_id, name, hists)
    p50, p95, p99 = np.percentile(decision_us, [50, 95, 99])
    n = int(ran.sum())
    store.add_measurements(run_id, name, [
        Measurement("decision_latency_p50", "us", float(p50), samples=n),
        Measurement("decision_latency_p95", "us", float(p95), samples=n),
        Measurement("decision_latency_p99", "us", float(p99), samples=n),
        Measurement("decision_budget", "ms", 50.0),
        Measurement("decision_deadline_misses", "count", float(np.count_nonzero(decision_us > 50_000)), samples=n),
        Measurement("frames", "count", float(frames)),
        Measurement("fps", "FPS", 1e6 / float(ft.mean()), samples=n),
        Measurement("fps_1pct_low", "FPS", 1e6 / float(np.percentile(ft, 99)), samples=n),
        Measurement("frame_jitter_std", "us", float(dev.std()), samples=n),
        Measurement("frame_jitter_p99", "us", float(np.percentile(dev, 99)), samples=n),
        Measurement("stutters", "count", 0.0),
        Measurement("faults", "count", 1.0),
        Measurement("mem_peak", "B", 1.42e9, samples=40),
    ])  # fmt: skip
    switch = int(t0[frames // 2])
    store.add_faults(run_id, name, [FaultEvent("oom", "new model ran out of memory", 8, 7, switch, switch + 1_200_000,
                                               None, 1200.0, 412_000, "")])  # fmt: skip


def build_store(
    path: Path, runs: int, devices: int, frames: int, *, regress: str = "orin-1", regressed_runs: int = 1
) -> int:
    """Write `runs` runs of session "synthetic" (baseline "default" = the first; the last `regressed_runs` have a
    +25% latency regression on `regress`, and are not accepted into later baselines); return the last run's id."""
    rng = np.random.default_rng(0)
    last = 0
    with open_store(path) as store:
        for r in range(runs):
            last = store.begin_run("nightly", bench="synthetic", session="synthetic")
            for name, kind, fps, latency in DEVICES[:devices]:
                factor = 1.25 if (r >= runs - regressed_runs and name == regress) else 1.0
                write_device(store, last, name, kind, fps, latency, frames, rng, factor)
                accept(store, last, name, factor == 1.0, "" if factor == 1.0 else "regressed")
            store.finish_run(last, "ok")
            if r == 0:
                set_baseline(store, last)
    return last

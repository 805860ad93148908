"""Telemetry samples in the results store (table `telemetry`: one row per sample and value)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bench.results.runview import TimeSeries
from bench.results.store import ResultStore
from bench.telemetry.monitor import Sample, unit_of


def add_telemetry(store: ResultStore, run_id: int, device: str, samples: Iterable[Sample]) -> int:
    """Write `samples` of `device` in run `run_id`; returns how many values were written."""
    rows = [
        (run_id, device, s.t_ns, name, float(value), unit_of(name), s.source)
        for s in samples
        for name, value in s.values.items()
    ]
    with store._tx():
        store.db.executemany("INSERT OR REPLACE INTO telemetry VALUES (?,?,?,?,?,?,?)", rows)
    return len(rows)


def load_telemetry(store: ResultStore, run_id: int, device: str, origin_ns: int | None = None) -> dict[str, TimeSeries]:
    """Every telemetry value of `device` in run `run_id` as a time series, in seconds since `origin_ns`
    (bench clock; default: the device's first sample)."""
    rows = store.db.execute(
        "SELECT name, unit, t_ns, value FROM telemetry WHERE run_id = ? AND device = ? ORDER BY name, t_ns",
        (run_id, device),
    ).fetchall()
    if not rows:
        return {}
    origin = origin_ns if origin_ns is not None else min(r[2] for r in rows)
    grouped: dict[str, tuple[str, list[float], list[float]]] = {}
    for name, unit, t_ns, value in rows:
        _, ts, vs = grouped.setdefault(name, (unit, [], []))
        ts.append((t_ns - origin) / 1e9)
        vs.append(value)
    return {name: TimeSeries(unit, np.asarray(ts), np.asarray(vs)) for name, (unit, ts, vs) in grouped.items()}

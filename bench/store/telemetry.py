"""Telemetry samples written to the results store (table `telemetry`: one row per sample and value)."""

from __future__ import annotations

from collections.abc import Iterable

from bench.store.results import ResultStore
from bench.telemetry.monitor import Sample, unit_of


def add_telemetry(store: ResultStore, run_id: int, device: str, samples: Iterable[Sample]) -> int:
    """Write `samples` of `device` in run `run_id`; returns how many values were written."""
    rows = [(s.t_ns, name, float(value), unit_of(name), s.source) for s in samples for name, value in s.values.items()]
    return store.measures.add_telemetry(run_id, device, rows)

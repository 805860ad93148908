"""A run's meter samples in the results store, for the report's power-over-time plot: telemetry rows named
POWER_NAME (mW, source "meter"), averaged down to at most MAX_POINTS. The figures themselves are measurements
(bench.measure.energy), computed from every sample before this thinning."""

from __future__ import annotations

from collections.abc import Sequence

from bench.energy.protocol import PowerSample
from bench.results.store import ResultStore

POWER_NAME = "meter_power_mw"
MAX_POINTS = 4000


def thin(samples: Sequence[PowerSample], max_points: int = MAX_POINTS) -> list[PowerSample]:
    """Consecutive samples averaged (energy-weighted) in groups, so that at most `max_points` remain."""
    group = max(1, -(-len(samples) // max_points))
    out = []
    for i in range(0, len(samples), group):
        chunk = samples[i : i + group]
        dt = sum(s.dt_ns for s in chunk)
        mean = sum(s.power_mw * s.dt_ns for s in chunk) / dt if dt else chunk[-1].power_mw
        out.append(PowerSample(chunk[-1].t_ns, dt, mean))
    return out


def add_power(store: ResultStore, run_id: int, device: str, samples: Sequence[PowerSample]) -> int:
    """Store `samples` of `device` (thinned); how many rows were written."""
    rows = [(s.t_ns, POWER_NAME, round(s.power_mw, 3), "mW", "meter") for s in thin(samples)]
    return store.add_telemetry(run_id, device, rows)

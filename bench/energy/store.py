"""A run's meter samples in the results store (any sink with `add_telemetry`, bench.replay.sink.MeasureSink), for the
report's power-over-time plot: telemetry rows named
POWER_NAME (mW, source "meter"), averaged down to at most MAX_POINTS. The figures themselves are measurements
(bench.measure.energy), computed from every sample before this thinning."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from bench.energy.protocol import PowerSample


class TelemetrySink(Protocol):
    """Where time series go (the results store)."""

    def add_telemetry(self, run_id: int, device: str, rows: Iterable[tuple[int, str, float, str, str]]) -> int:
        """Write (t_ns, name, value, unit, source) rows of `device`; how many."""


POWER_NAME = "meter_power_mw"
WINDOWS_NAME = "meter_inferring"  # 1 inside an inference window t0..t1 (bench clock), 0 outside: the plot's shading
MAX_POINTS = 4000
MAX_WINDOWS = 2000


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


def add_power(
    store: TelemetrySink,
    run_id: int,
    device: str,
    samples: Sequence[PowerSample],
    windows: Sequence[tuple[int, int]] = (),
) -> int:
    """Store `samples` of `device` (thinned) and its inference windows (the first MAX_WINDOWS, as steps); how many
    rows were written."""
    rows = [(s.t_ns, POWER_NAME, round(s.power_mw, 3), "mW", "meter") for s in thin(samples)]
    for a, b in list(windows)[:MAX_WINDOWS]:
        rows += [(a - 1, WINDOWS_NAME, 0.0, "", "meter"), (a, WINDOWS_NAME, 1.0, "", "meter"),
                 (b, WINDOWS_NAME, 1.0, "", "meter"), (b + 1, WINDOWS_NAME, 0.0, "", "meter")]  # fmt: skip
    return store.add_telemetry(run_id, device, rows)

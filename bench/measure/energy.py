"""Energy per decision from power-meter samples and the frames' inference windows, on the bench clock.

A meter sample is the mean power over the `dt_ns` before `t_ns` (bench clock). Its energy is spread evenly over
that interval, so the energy between any two bench times is the difference of the cumulative energy, linearly
interpolated. Each inference frame's window t0..t1 (device clock, mapped through the device's offset/drift
mapping) is integrated: energy per decision (its P50 and P99), mean power while inferring, and while idle (the
rest of the measured span). Energy per session is the whole measured span.

The honest rule for slow meters: a meter whose samples are longer than a quarter of the median inference window
cannot tell one decision's energy from the idle time around it, so only energy per session and mean power are
given, with the flag `meter_too_slow_for_decisions` (tegrastats at 1 s, the PMIC, most hwmon sensors).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bench.measure.records import DeviceClock, FrameLike
from bench.measure.samples import too_few_flags

SAMPLES_PER_WINDOW = 4  # a meter resolves decisions when its sample is at most a quarter of the median window
TOO_SLOW = "meter_too_slow_for_decisions"
SLOW_RULE = f"meter sample longer than 1/{SAMPLES_PER_WINDOW} of the median inference window"


class PowerLike(Protocol):
    """A meter sample: mean power (mW) over the `dt_ns` before `t_ns` (bench clock)."""

    t_ns: int
    dt_ns: int
    power_mw: float


@dataclass(frozen=True)
class EnergyFigures:
    """Energy figures of one device in one run (None where the meter cannot give them)."""

    meter: str
    period_s: float
    decisions: int
    per_decision_mj: list[float] = field(default_factory=list)
    p50_mj: float | None = None
    p99_mj: float | None = None
    mean_mj: float | None = None
    inferring_mw: float | None = None
    idle_mw: float | None = None
    session_mj: float | None = None
    mean_mw: float | None = None
    span_s: float = 0.0
    flags: tuple[str, ...] = ()
    windows_ns: list[tuple[int, int]] = field(default_factory=list)  # bench-clock inference windows


class Integrator:
    """Cumulative energy (mJ) of meter samples at any bench time."""

    def __init__(self, samples: Sequence[PowerLike]) -> None:
        ordered = sorted(samples, key=lambda s: s.t_ns)
        ends = np.array([s.t_ns for s in ordered], dtype=np.float64)
        starts = np.array([s.t_ns - s.dt_ns for s in ordered], dtype=np.float64)
        joules = np.array([s.power_mw * s.dt_ns / 1e9 for s in ordered], dtype=np.float64)  # mJ per sample
        # knots: each sample's start (energy so far) and end (plus its own); gaps between samples add nothing
        self.times = np.empty(2 * len(ordered))
        self.cum = np.empty(2 * len(ordered))
        self.times[0::2], self.times[1::2] = starts, ends
        before = np.concatenate([[0.0], np.cumsum(joules)[:-1]]) if len(ordered) else np.array([])
        self.cum[0::2], self.cum[1::2] = before, before + joules
        self.start_ns = float(starts.min()) if len(ordered) else 0.0
        self.end_ns = float(ends.max()) if len(ordered) else 0.0

    def energy_mj(self, a_ns: float, b_ns: float) -> float:
        """Energy (mJ) between bench times a and b."""
        lo, hi = np.interp([a_ns, b_ns], self.times, self.cum)
        return float(hi - lo)

    def covers(self, a_ns: float, b_ns: float) -> bool:
        """True when the samples span a..b."""
        return self.start_ns <= a_ns and b_ns <= self.end_ns


def energy_figures(
    samples: Sequence[PowerLike], frames: Sequence[FrameLike], clock: DeviceClock, meter: str, period_s: float
) -> EnergyFigures:
    """Integrate `samples` over the inference windows of `frames` (device clock, mapped by `clock`)."""
    if not samples:
        return EnergyFigures(meter, period_s, 0, flags=("no_meter_samples",))
    whole = Integrator(samples)
    span_ns = whole.end_ns - whole.start_ns
    session = whole.energy_mj(whole.start_ns, whole.end_ns)
    mean_mw = session / (span_ns / 1e9) if span_ns > 0 else None
    windows = [
        (clock.to_bench_ns(r.t0), clock.to_bench_ns(r.t1))
        for r in frames
        if r.ran and r.t0 is not None and r.t1 is not None and r.t1 >= r.t0
    ]
    windows = [(a, b) for a, b in windows if whole.covers(a, b)]
    base = dict(meter=meter, period_s=period_s, session_mj=session, mean_mw=mean_mw, span_s=span_ns / 1e9)
    if not windows:
        return EnergyFigures(decisions=0, flags=("no_measured_decisions",), **base)  # type: ignore[arg-type]
    median_ns = statistics.median(b - a for a, b in windows)
    if period_s * 1e9 * SAMPLES_PER_WINDOW > median_ns:
        return EnergyFigures(decisions=len(windows), flags=(TOO_SLOW,), windows_ns=windows, **base)  # type: ignore[arg-type]
    each = [whole.energy_mj(a, b) for a, b in windows]
    busy_ns = sum(b - a for a, b in windows)
    inferring = sum(each)
    idle_ns = span_ns - busy_ns
    arr = np.array(each)
    return EnergyFigures(
        decisions=len(each),
        per_decision_mj=each,
        p50_mj=float(np.percentile(arr, 50, method="inverted_cdf")),
        p99_mj=float(np.percentile(arr, 99, method="inverted_cdf")),
        mean_mj=float(arr.mean()),
        inferring_mw=inferring / (busy_ns / 1e9) if busy_ns > 0 else None,
        idle_mw=(session - inferring) / (idle_ns / 1e9) if idle_ns > 0 else None,
        flags=too_few_flags(len(each), (99.0,)),
        windows_ns=windows,
        **base,  # type: ignore[arg-type]
    )

"""Energy per decision from power-meter samples and the decisions' windows.

A meter sample is the mean power over the `dt_ns` before `t_ns` (the meter's timeline). Its energy is spread evenly
over that interval, so the energy between any two times is the difference of the cumulative energy, linearly
interpolated. Each decision's window is integrated: energy per decision (its P50 and P99), mean power while
inferring, and while idle (the rest of the measured span). Energy per session is the whole measured span.

Where the windows come from:
- the inference marker (flag `marker`): the device drives a GPIO high around each inference, wired to one of the
  meter's logic inputs (a PPK2's D0-D7), and the meter's samples carry that input's level with bins ending at its
  edges. Each high run that starts and ends inside the samples is one decision's window, on the meter's own
  timeline: no clock mapping, as a lab measures energy per inference with a PPK2;
- otherwise each inference frame's window t0..t1 (device clock), mapped to the bench clock through the device's
  offset/drift mapping.

For frame windows, how fine the meter is decides the method, and the flags say which was used:
- samples at most a quarter of the median inference window: each window is integrated directly;
- samples at most a quarter of the median decision period (window to window): `attributed` -- each decision
  gets the span from the midpoint of the idle gap before it to the midpoint of the gap after it; the idle power
  P_idle is fitted by least squares over those spans (energy = P_idle x idle time + P_inf x window time), and a
  decision's energy is its span's energy minus P_idle x the span's idle time. A window shorter than the meter's
  sample is then still measured, from how much more its span drew than idling would have;
- coarser (tegrastats at 1 s, the PMIC, most hwmon sensors): one sample holds many decisions. Energy per decision
  is then the decisions' active energy over their number (flag `active_energy_over_decisions`): the energy from the
  first decision's start to the end of decision ACTIVE_DECISIONS (the same stretch of the session every night),
  less the idle baseline (the mean power the meter read before the first decision, while the device idled) over
  that time. It has no P99 (no single decision is seen). Without a sample before the first decision there is no
  baseline: only energy per session and mean power are given, with the flag `meter_too_slow_for_decisions`. A run
  that played fewer than ACTIVE_DECISIONS decisions gives the figure over the stretch it played, flagged
  `too_few_decisions`: a shorter stretch of the session is another figure (the judge calls it inconclusive).

A meter on the device's own clock (`device_clock`: the PMIC's and a device hwmon file's readings are stamped with
the device's uptime) takes the frames' t0..t1 as they are, with no mapping (flag `device_clock`); on an icount
guest that clock is the guest's counted one, as the virtual C6's PPK2 samples are its counted clock.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bench.agent.frame import Frame
from bench.measure.records import DeviceClock
from bench.measure.samples import too_few_flags

SAMPLES_PER_WINDOW = 4  # a meter resolves decisions when its sample is at most a quarter of the median window
TOO_SLOW = "meter_too_slow_for_decisions"
ATTRIBUTED = "attributed"  # per-decision energy from spans around each window and a fitted idle power
MARKER = "marker"  # the windows are the high runs of the meter's logic input wired to the inference marker
ACTIVE = "active_energy_over_decisions"  # (energy - idle baseline x time) over the decisions, for a coarse meter
DEVICE_CLOCK = "device_clock"  # samples and windows both on the device's own clock
ACTIVE_DECISIONS = 240  # active energy is taken over the session's first decisions (8 s of a 30 fps session)
SHORT = "too_few_decisions"  # active energy over fewer than ACTIVE_DECISIONS: another stretch of the session
SLOW_RULE = f"meter sample longer than 1/{SAMPLES_PER_WINDOW} of the median decision period"


class PowerLike(Protocol):
    """A meter sample: mean power (mW) over the `dt_ns` before `t_ns`, and the inference marker's level over it
    (None when the meter reads no marker)."""

    t_ns: int
    dt_ns: int
    power_mw: float
    marker: int | None


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
    windows_ns: list[tuple[int, int]] = field(default_factory=list)  # the decisions' windows (the samples' timeline)
    marker: str | None = None  # the meter input the windows came from (e.g. "PPK2 D0"), None for frame windows


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
    samples: Sequence[PowerLike],
    frames: Sequence[Frame],
    clock: DeviceClock,
    meter: str,
    period_s: float,
    marker: str | None = None,
    device_clock: bool = False,
) -> EnergyFigures:
    """Integrate `samples` over each decision's window: the high runs of the inference marker when the meter reads
    one (`marker` names its input) and its samples hold any, else the inference windows of `frames` (device clock,
    mapped by `clock`, or taken as they are when the samples are on the device's clock too: `device_clock`)."""
    if not samples:
        return EnergyFigures(meter, period_s, 0, flags=("no_meter_samples",))
    whole = Integrator(samples)
    span_ns = whole.end_ns - whole.start_ns
    session = whole.energy_mj(whole.start_ns, whole.end_ns)
    mean_mw = session / (span_ns / 1e9) if span_ns > 0 else None
    base = dict(meter=meter, period_s=period_s, session_mj=session, mean_mw=mean_mw, span_s=span_ns / 1e9)
    marked = marker_windows(samples) if marker is not None else []
    if marked:
        return _integrated(marked, whole, (MARKER,), marker=marker, **base)  # type: ignore[arg-type]
    to_ns = (lambda us: us * 1000) if device_clock else clock.to_bench_ns
    windows = [
        (to_ns(r.t0), to_ns(r.t1)) for r in frames if r.ran and r.t0 is not None and r.t1 is not None and r.t1 >= r.t0
    ]
    windows = sorted((a, b) for a, b in windows if whole.covers(a, b))
    silent = ("no_marker_windows",) if marker is not None else ()  # the meter reads a marker that never went high
    silent += (DEVICE_CLOCK,) if device_clock else ()
    if not windows:
        return EnergyFigures(decisions=0, flags=("no_measured_decisions", *silent), **base)  # type: ignore[arg-type]
    sample_ns = period_s * 1e9 * SAMPLES_PER_WINDOW
    if sample_ns <= statistics.median(b - a for a, b in windows):
        return _integrated(windows, whole, silent, **base)  # type: ignore[arg-type]
    spans = _spans(windows, whole)
    if len(spans) < 3 or sample_ns > statistics.median(hi - lo for lo, hi, _w in spans):
        return _active(samples, windows, whole, silent, **base)  # type: ignore[arg-type]
    each, idle_mw = _attributed(spans, whole)
    busy_ns = sum(w for _lo, _hi, w in spans)
    return _figures(each, busy_ns, idle_mw, (ATTRIBUTED, *silent), windows, **base)  # type: ignore[arg-type]


def _active(
    samples: Sequence[PowerLike],
    windows: list[tuple[int, int]],
    whole: Integrator,
    flags: tuple[str, ...],
    **base: object,
) -> EnergyFigures:
    """Energy per decision of a meter too coarse for single decisions: the energy of the span of the first
    ACTIVE_DECISIONS decisions (the same stretch of the session every night; a night that played fewer is flagged
    SHORT), less the idle baseline over that span, over those decisions. The baseline is the mean power of the readings
    that ended before the first decision: their energy over their time, as the span's is taken (each reading's
    rounding and any work that comes in some readings and not others are spread over them, as in the span)."""
    counted = windows[:ACTIVE_DECISIONS]
    a, b = counted[0][0], counted[-1][1]
    idle = [s for s in samples if s.t_ns <= a and s.dt_ns > 0]
    if not idle or b <= a:
        return EnergyFigures(decisions=len(windows), flags=(TOO_SLOW, *flags), windows_ns=windows, **base)  # type: ignore[arg-type]
    idle_mw = sum(s.power_mw * s.dt_ns for s in idle) / sum(s.dt_ns for s in idle)
    each = (whole.energy_mj(a, b) - idle_mw * (b - a) / 1e9) / len(counted)
    short = (SHORT,) if len(counted) < ACTIVE_DECISIONS else ()
    return EnergyFigures(
        decisions=len(counted),
        p50_mj=each,
        mean_mj=each,
        idle_mw=idle_mw,
        flags=(ACTIVE, *short, *flags),
        windows_ns=windows,
        **base,  # type: ignore[arg-type]
    )


def marker_windows(samples: Sequence[PowerLike]) -> list[tuple[int, int]]:
    """(start, end) of each run of samples whose marker is high, on the samples' timeline; a run touching the first
    or last sample may be cut short, so it is left out."""
    ordered = sorted(samples, key=lambda s: s.t_ns)
    out = []
    start: int | None = None
    for i, s in enumerate(ordered):
        if s.marker and start is None:
            start = i
        elif not s.marker and start is not None:
            if start > 0:
                out.append((ordered[start].t_ns - ordered[start].dt_ns, ordered[i - 1].t_ns))
            start = None
    return out


def _integrated(
    windows: list[tuple[int, int]], whole: Integrator, flags: tuple[str, ...], **base: object
) -> EnergyFigures:
    """Each window integrated directly; idle power from the rest of the span."""
    each = [whole.energy_mj(a, b) for a, b in windows]
    busy_ns = sum(b - a for a, b in windows)
    span_ns = whole.end_ns - whole.start_ns
    session = float(base["session_mj"])  # type: ignore[arg-type]
    idle_mw = (session - sum(each)) / ((span_ns - busy_ns) / 1e9) if span_ns > busy_ns else None
    return _figures(each, busy_ns, idle_mw, flags, windows, **base)


def _figures(
    each: list[float],
    busy_ns: float,
    idle_mw: float | None,
    flags: tuple[str, ...],
    windows: list[tuple[int, int]],
    **base: object,
) -> EnergyFigures:
    """The figures of the decisions' energies `each` (mJ) over `busy_ns` of windows."""
    arr = np.array(each)
    return EnergyFigures(
        decisions=len(each),
        per_decision_mj=each,
        p50_mj=float(np.percentile(arr, 50, method="inverted_cdf")),
        p99_mj=float(np.percentile(arr, 99, method="inverted_cdf")),
        mean_mj=float(arr.mean()),
        inferring_mw=sum(each) / (busy_ns / 1e9) if busy_ns > 0 else None,
        idle_mw=idle_mw,
        flags=flags + too_few_flags(len(each), (99.0,)),
        windows_ns=windows,
        **base,  # type: ignore[arg-type]
    )


def _spans(windows: list[tuple[int, int]], whole: Integrator) -> list[tuple[float, float, float]]:
    """(start, end, window time) of each inner decision's span: from the middle of the idle gap before its window
    to the middle of the gap after it (the first and last decisions, with one side open, are left out)."""
    out = []
    for prev, (a, b), nxt in zip(windows, windows[1:], windows[2:], strict=False):
        lo, hi = (prev[1] + a) / 2, (b + nxt[0]) / 2
        if prev[1] <= a and b <= nxt[0] and whole.covers(lo, hi):
            out.append((lo, hi, float(b - a)))
    return out


def _attributed(spans: list[tuple[float, float, float]], whole: Integrator) -> tuple[list[float], float]:
    """Each span's decision energy (mJ) and the fitted idle power (mW): least squares of span energy on idle time
    and window time."""
    energy = np.array([whole.energy_mj(lo, hi) for lo, hi, _w in spans])
    window_s = np.array([w for _lo, _hi, w in spans]) / 1e9
    idle_s = np.array([hi - lo for lo, hi, _w in spans]) / 1e9 - window_s
    (idle_mw, _inferring_mw), *_ = np.linalg.lstsq(np.column_stack([idle_s, window_s]), energy, rcond=None)
    return [float(e) for e in energy - idle_mw * idle_s], float(idle_mw)

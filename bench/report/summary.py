"""Per-device summary figures of a run: what the report's table and trends show."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from bench.measure.frames import count_stutters  # the one stutter definition (window, factor)
from bench.results.runview import (
    FIRST_FRAME_MS,
    FRAME_DEVIATION_US,
    FRAME_INTERVAL_MS,
    INFERENCE_MS,
    LATENCY_MS,
    MEMORY_PEAK_MB,
    DeviceRun,
    Samples,
)
from bench.results.view_adapter import TO_UNIT

DEADLINE_MISSES = "decision_deadline_misses"  # the stored measurement, when the run has one


@dataclass(frozen=True)
class DeviceSummary:
    """One device's headline numbers for one run. Units are in the field names."""

    device: str
    kind: str
    latency_n: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    inference_n: int
    inference_p50_ms: float | None  # t1 - t0 on the device clock
    frames: int
    fps: float | None  # 1 / mean frame time
    low_1pct_fps: float | None  # 1 / P99 frame time
    jitter_std_us: float | None  # std of t0 - due
    jitter_p99_us: float | None  # P99 of |t0 - due|
    deadline_budget_ms: float | None
    deadline_misses: int
    stutters: int  # frames longer than 2.5x the moving average
    first_frame_n: int
    first_frame_ms: float | None  # median over the run's first-frame samples (cold starts)
    memory_peak_mb: float | None
    faults: int
    ota_transfers: int
    model_versions: tuple[str, ...]
    replay_session_s: float | None = None  # the session's length
    replay_covered_s: float | None = None  # how much of it was played, from the start
    pace_clock: str | None = None  # the replay's fidelity figure: "bench" (send error), "device" (release error)
    pace_p50_ms: float | None = None
    pace_p99_ms: float | None = None
    pace_max_ms: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready form."""
        data = asdict(self)
        data["model_versions"] = list(self.model_versions)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def percentiles(values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Nearest-rank percentiles of finite `values` in one partial sort; None when empty."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return [None] * len(qs)
    ranks = [max(1, math.ceil(q * values.size)) - 1 for q in qs]
    part = np.partition(values, sorted(set(ranks)))
    return [float(part[r]) for r in ranks]


def _finite(samples: Samples | None) -> np.ndarray:
    values = samples.values if samples is not None else np.empty(0)
    return values[np.isfinite(values)]


def _stored(device: DeviceRun, name: str, unit: str) -> float | None:
    """The run's stored measurement `name` in `unit` (the figure the verdicts judge), or None."""
    value, stored_unit = device.scalars.get(name, (None, ""))
    if value is None:
        return None
    if stored_unit == unit or (stored_unit, unit) == ("FPS", "FPS"):
        return float(value)
    factor = TO_UNIT.get((stored_unit, unit))
    return float(value) * factor if factor is not None else None


def _prefer(stored: float | None, computed: float | None) -> float | None:
    return stored if stored is not None else computed


def summarize(device: DeviceRun) -> DeviceSummary:
    """The headline numbers of `device`: the stored measurements where the run has them (one definition, shared
    with the verdicts: HdrHistogram percentiles of bench.measure), else computed from the samples (synthetic or
    older runs)."""
    frames = device.frames
    latency = _finite(device.series(LATENCY_MS))
    p50, p95, p99 = percentiles(latency, (0.5, 0.95, 0.99))
    fps = low = jitter_std = jitter_p99 = None
    intervals = _finite(device.series(FRAME_INTERVAL_MS))
    if intervals.size:
        fps = 1000.0 / float(np.mean(intervals))
        (p99_interval,) = percentiles(intervals, (0.99,))
        low = 1000.0 / p99_interval if p99_interval else None
    deviation = _finite(device.series(FRAME_DEVIATION_US))
    if deviation.size:
        (jitter_p99,) = percentiles(np.abs(deviation), (0.99,))
    if frames is not None and len(frames) > 1:  # sequence-dependent figures need the frames in order
        signed = frames.deviation_us[np.isfinite(frames.deviation_us)]
        jitter_std = float(np.std(signed)) if signed.size else None
        stutters = count_stutters(frames.interval_ms[np.isfinite(frames.interval_ms)].tolist())
    else:
        jitter_std = device.scalars.get("frame_jitter_std", (None, ""))[0]
        stutters = int(device.scalars.get("stutters", (0, ""))[0] or 0)
    budget = device.decision_budget_ms
    stored_misses = device.scalars.get(DEADLINE_MISSES, (None, ""))[0]
    if stored_misses is not None:  # counted at measurement time, including inputs never decided
        misses = int(stored_misses)
    else:
        misses = int(np.count_nonzero(latency > budget)) if budget else 0
    first = device.series(FIRST_FRAME_MS)
    inference = _finite(device.series(INFERENCE_MS))
    memory = device.series(MEMORY_PEAK_MB)
    first_p50 = percentiles(first.values, (0.5,))[0] if first else None
    memory_peak = float(np.max(memory.values)) if memory and len(memory) else None
    return DeviceSummary(
        device=device.name,
        kind=device.kind,
        latency_n=int(latency.size),
        latency_p50_ms=_prefer(_stored(device, "decision_latency_p50", "ms"), p50),
        latency_p95_ms=_prefer(_stored(device, "decision_latency_p95", "ms"), p95),
        latency_p99_ms=_prefer(_stored(device, "decision_latency_p99", "ms"), p99),
        inference_n=int(inference.size),
        inference_p50_ms=_prefer(_stored(device, "inference_latency_p50", "ms"), percentiles(inference, (0.5,))[0]),
        frames=len(frames) if frames is not None else 0,
        fps=_prefer(_stored(device, "fps", "FPS"), fps),
        low_1pct_fps=_prefer(_stored(device, "fps_1pct_low", "FPS"), low),
        jitter_std_us=_prefer(_stored(device, "frame_jitter_std", "us"), jitter_std),
        jitter_p99_us=_prefer(_stored(device, "frame_jitter_p99", "us"), jitter_p99),
        deadline_budget_ms=budget,
        deadline_misses=misses,
        stutters=stutters,
        first_frame_n=len(first) if first else 0,
        first_frame_ms=_prefer(_stored(device, "first_frame_p50", "ms"), first_p50),
        memory_peak_mb=_prefer(_stored(device, "mem_peak", "MB"), memory_peak),
        faults=len(device.faults),
        ota_transfers=len(device.ota),
        model_versions=tuple(device.model_versions),
        replay_session_s=_stored(device, "replay_session", "s"),
        replay_covered_s=_stored(device, "replay_covered", "s"),
        **_pace(device),
    )


PACE = {"bench": "replay_send_error", "device": "replay_release_error"}  # ns, bench.measure.replay_timing


def _pace(device: DeviceRun) -> dict:
    """The replay's send (bench clock) or release (device clock) error P50/P99/max in ms, when stored."""
    for clock, name in PACE.items():
        values = [device.scalars.get(f"{name}_{q}", (None, ""))[0] for q in ("p50", "p99", "max")]
        if values[1] is not None:
            ms = [None if v is None else v / 1e6 for v in values]
            return {"pace_clock": clock, "pace_p50_ms": ms[0], "pace_p99_ms": ms[1], "pace_max_ms": ms[2]}
    return {}

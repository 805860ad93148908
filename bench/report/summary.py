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


def summarize(device: DeviceRun) -> DeviceSummary:
    """The headline numbers of `device`."""
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
    return DeviceSummary(
        device=device.name,
        kind=device.kind,
        latency_n=int(latency.size),
        latency_p50_ms=p50,
        latency_p95_ms=p95,
        latency_p99_ms=p99,
        inference_n=int(inference.size),
        inference_p50_ms=percentiles(inference, (0.5,))[0],
        frames=len(frames) if frames is not None else 0,
        fps=fps,
        low_1pct_fps=low,
        jitter_std_us=jitter_std,
        jitter_p99_us=jitter_p99,
        deadline_budget_ms=budget,
        deadline_misses=misses,
        stutters=stutters,
        first_frame_n=len(first) if first else 0,
        first_frame_ms=percentiles(first.values, (0.5,))[0] if first else None,
        memory_peak_mb=float(np.max(memory.values)) if memory and len(memory) else None,
        faults=len(device.faults),
        ota_transfers=len(device.ota),
        model_versions=tuple(device.model_versions),
    )

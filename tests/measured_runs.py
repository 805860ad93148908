"""Frame records and input send times with known shapes, measured by `bench.measure.measure_device`: the one
path the product takes from records to stored figures, for the report, verdict and store tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.agent.frame import Frame
from bench.measure.device import DeviceMeasurements, measure_device
from bench.measure.records import OffsetClock
from bench.measure.replay_timing import ReplayTiming

BUDGET_MS = 50.0


@dataclass(frozen=True)
class Shape:
    """How one synthetic device behaves: frame rate, median decision latency (ms), memory peak (bytes)."""

    fps: float
    latency_ms: float
    memory_b: float
    ran: float = 1.0  # fraction of frames whose inference ran
    factor: float = 1.0  # scales decision and inference latency (a regression)
    cold_starts: int = 8
    memory_spread: float = 0.005  # relative spread of the agent's memory reports


def records(shape: Shape, frames: int, rng: np.random.Generator) -> tuple[list[Frame], dict[int, int]]:
    """`frames` frame records (device us, clock offset 0) with normal start jitter and a few stalls, one input per
    frame, and when each input was sent (bench ns) so that its decision latency is log-normal around the shape's."""
    period = 1e6 / shape.fps
    gaps = np.full(frames, period)
    gaps[rng.integers(0, frames, max(1, frames // 2000))] *= 3.0  # a few stutters
    due = np.cumsum(gaps).astype(np.int64)
    t0 = due + np.abs(rng.normal(0.0, 1240.0, frames)).astype(np.int64)
    inference = (rng.lognormal(np.log(shape.latency_ms * 600), 0.2, frames) * shape.factor).astype(np.int64)
    t1 = t0 + np.maximum(inference, 1)
    ran = rng.random(frames) < shape.ran
    latency_ns = rng.lognormal(np.log(shape.latency_ms * 1e6), 0.25, frames) * shape.factor
    sent = (t1 * 1000 - latency_ns).astype(np.int64)
    rx = (t1 * 1000 + 5_000_000).tolist()
    out = [
        Frame(i=i, vsync=d, due=d, ran=r, t0=a, t1=b, act=1, p=0.5, seq=i, model=7 if i < frames // 2 else 8, rx_ns=x)
        for i, (d, r, a, b, x) in enumerate(zip(due.tolist(), ran.tolist(), t0.tolist(), t1.tolist(), rx, strict=True))
    ]
    return out, dict(enumerate(sent.tolist()))


def measured(
    shape: Shape, frames: list[Frame], sent_ns: dict[int, int], rng: np.random.Generator
) -> DeviceMeasurements:
    """What the bench measures of these records (cold starts and memory reports drawn from the shape)."""
    cold = (rng.normal(18.2, 0.4, shape.cold_starts) * shape.factor).tolist()
    stats = [{"mem_peak": float(v)} for v in rng.normal(shape.memory_b, shape.memory_b * shape.memory_spread, 8)]
    end_ns = max(f.t1 for f in frames) * 1000 + int(BUDGET_MS * 1e6) if frames else None
    timing = ReplayTiming(clock="bench", inputs_ns=sent_ns, latency_clock=OffsetClock(0), end_ns=end_ns,
                          start_ns=None, send_errors_ns=None, session_s=0.0, covered_s=None, loop_s=None,
                          vsync_hz=60, fps=60)  # fmt: skip
    return measure_device(frames, clock=OffsetClock(0), budget_ms=BUDGET_MS, timing=timing, stats=stats,
                          cold_starts_ms=cold)  # fmt: skip

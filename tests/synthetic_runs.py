"""Synthetic runs with known shapes, for report and verdict tests and the render benchmark."""

from __future__ import annotations

import numpy as np

from bench.results.runview import (
    FIRST_FRAME_MS,
    FRAME_DEVIATION_US,
    FRAME_INTERVAL_MS,
    LATENCY_MS,
    MEMORY_PEAK_MB,
    DeviceRun,
    FaultEvent,
    FrameTrace,
    OtaTransfer,
    RunView,
    Samples,
)

# name, kind, fps target, median decision latency (ms), memory (MB)
FLEET = (
    ("c6-a", "esp32c6", 20, 24.6, 0.4),
    ("orin-1", "jetson-orin-nx", 60, 3.1, 1420.0),
    ("pi5-1", "pi5", 30, 9.5, 610.0),
    ("switch-1", "switch-arm64", 30, 29.0, 900.0),
)


def synthetic_device(
    name: str, kind: str, fps: float, latency_ms: float, memory_mb: float, frames: int, rng: np.random.Generator,
    *, latency_factor: float = 1.0, with_events: bool = True,
) -> DeviceRun:  # fmt: skip
    """One device's frames and samples: log-normal latencies, normal frame jitter, a stall or two."""
    period = 1000.0 / fps
    deviation_us = np.abs(rng.normal(0.0, 1240.0, frames))
    interval = period + rng.normal(0.0, 1.24, frames)
    interval[rng.integers(0, frames, max(1, frames // 2000))] *= 3.0  # a few stutters
    interval = np.clip(interval, 0.2 * period, None)
    t_s = np.cumsum(interval) / 1000.0
    interval[0] = np.nan
    latency = rng.lognormal(np.log(latency_ms), 0.25, frames) * latency_factor
    device = DeviceRun(
        name=name, kind=kind, decision_budget_ms=50.0,
        frames=FrameTrace(t_s=t_s, interval_ms=interval, deviation_us=deviation_us),
        model_versions=["npc-policy-int8@3f9a1c2", *(["npc-policy-int8@77b0e41"] if with_events else [])],
    )  # fmt: skip
    device.samples = {
        LATENCY_MS: Samples("ms", latency),
        FRAME_INTERVAL_MS: Samples("ms", interval),
        FRAME_DEVIATION_US: Samples("us", deviation_us),
        FIRST_FRAME_MS: Samples("ms", rng.normal(18.2, 0.4, 8) * latency_factor),
        MEMORY_PEAK_MB: Samples("MB", rng.normal(memory_mb, memory_mb * 0.005, 8)),
    }
    if with_events:
        end = float(t_s[-1])
        device.faults = [
            FaultEvent(end * 0.3, "bad-signature", "model signed with an unknown key", "rejected, old model kept"),
            FaultEvent(end * 0.6, "oom", "new model ran out of memory 1.2 s after the switch", "rolled back in 412 ms"),
        ]
        device.ota = [
            OtaTransfer("npc-policy@3", "npc-policy@4", True, 23_552, 23, 1, 1840.0, 196.0, 14.0, "ok"),
            OtaTransfer(
                "npc-policy@4",
                "npc-policy@5",
                False,
                65_536,
                64,
                0,
                4210.0,
                12.0,
                0.0,
                "failed: signature does not verify (old model kept)",
            ),
        ]
    return device


def synthetic_run(
    run_id: str, started_at: str, *, frames: int = 3000, seed: int = 0, latency_factor: dict[str, float] | None = None,
    with_events: bool = True,
) -> RunView:  # fmt: skip
    """A run on the 4-device synthetic fleet; `latency_factor` scales chosen devices' latencies."""
    rng = np.random.default_rng(seed)
    factors = latency_factor or {}
    devices = {
        name: synthetic_device(name, kind, fps, lat, mem, frames, rng, latency_factor=factors.get(name, 1.0),
                               with_events=with_events)
        for name, kind, fps, lat, mem in FLEET
    }  # fmt: skip
    return RunView(run_id=run_id, started_at=started_at, devices=devices, status="finished",
                   meta={"fleet": "synthetic"})  # fmt: skip

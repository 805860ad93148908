"""Synthetic runs with known shapes, for report and verdict tests and the render benchmark: frame records measured
by bench.measure (tests/measured_runs.py) and read into a RunView the way the results store's are."""

from __future__ import annotations

import numpy as np

from bench.report.runview import DeviceView, FrameTrace, OtaTransfer, RunView, TimelineFault
from bench.report.view_adapter import add_stored
from tests.measured_runs import Shape, measured, records

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
) -> DeviceView:  # fmt: skip
    """One device's frames and stored figures: log-normal latencies, normal frame jitter, a stall or two."""
    shape = Shape(fps, latency_ms, memory_mb * 1e6, factor=latency_factor)
    recs, sent_ns = records(shape, frames, rng)
    result = measured(shape, recs, sent_ns, rng)
    t0 = np.array([r.t0 for r in recs], dtype=float)
    due = np.array([r.due for r in recs], dtype=float)
    trace = FrameTrace(t_s=(t0 - t0[0]) / 1e6, interval_ms=np.concatenate([[np.nan], np.diff(t0) / 1000.0]),
                       deviation_us=t0 - due)  # fmt: skip
    device = DeviceView(
        name=name, kind=kind, frames=trace,
        model_versions=["npc-policy-int8@3f9a1c2", *(["npc-policy-int8@77b0e41"] if with_events else [])],
    )  # fmt: skip
    add_stored(device, result.measurements, result.histograms)
    if with_events:
        end = float(trace.t_s[-1])
        device.faults = [
            TimelineFault(end * 0.3, "bad-signature", "model signed with an unknown key", "rejected, old model kept"),
            TimelineFault(
                end * 0.6, "oom", "new model ran out of memory 1.2 s after the switch", "rolled back in 412 ms"
            ),
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
    with_events: bool = True, devices: int = len(FLEET),
) -> RunView:  # fmt: skip
    """A run on the first `devices` of the 4-device synthetic fleet; `latency_factor` scales chosen devices'
    latencies."""
    rng = np.random.default_rng(seed)
    factors = latency_factor or {}
    devices = {
        name: synthetic_device(name, kind, fps, lat, mem, frames, rng, latency_factor=factors.get(name, 1.0),
                               with_events=with_events)
        for name, kind, fps, lat, mem in FLEET[:devices]
    }  # fmt: skip
    return RunView(run_id=run_id, started_at=started_at, devices=devices, status="finished",
                   meta={"fleet": "synthetic"})  # fmt: skip

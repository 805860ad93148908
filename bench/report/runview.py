"""RunView: the read-side picture of one stored run, as verdicts and reports consume it.

It is deliberately small and independent of how runs are stored: `bench.report.view_adapter` builds it
from the results store. Arrays are numpy, times are seconds since the run started unless named otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Names of the sample series the report reads from a stored run.
LATENCY_MS = "latency_ms"  # input -> decision (end to end, bench clock), one per replayed input
INFERENCE_MS = "inference_ms"  # t1 - t0 on the device, one per inference
FRAME_INTERVAL_MS = "frame_interval_ms"  # time between consecutive frames
FRAME_DEVIATION_US = "frame_deviation_us"  # |actual - scheduled| frame time
FIRST_FRAME_MS = "first_frame_ms"  # one per session replay / model (re)load
MEMORY_PEAK_MB = "memory_peak_mb"  # one peak per telemetry window or session


@dataclass(frozen=True)
class Samples:
    """Raw samples of one quantity, with their unit."""

    unit: str
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True)
class FrameTrace:
    """Per-inference-frame timing of one device, in frame order."""

    t_s: np.ndarray  # when the inference started, s since the device's first frame
    interval_ms: np.ndarray  # since the previous inference (first frame: NaN)
    deviation_us: np.ndarray  # actual - scheduled start time (signed)

    def __len__(self) -> int:
        return int(self.t_s.size)


@dataclass(frozen=True)
class TimeSeries:
    """A telemetry quantity sampled over time (memory, temperature...)."""

    unit: str
    t_s: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class TimelineFault:
    """Something that went wrong (or was injected) on a device, and how the device came out of it."""

    t_s: float | None  # since the run's first frame; None when nobody timed it (e.g. a refused update)
    kind: str  # e.g. "bad-signature", "oom", "panic", "rollback", "link-lost"
    detail: str = ""
    outcome: str = ""  # e.g. "rejected, old model kept", "rolled back in 412 ms"


@dataclass(frozen=True)
class OtaTransfer:
    """One model update delivered (or refused) on a device."""

    model_from: str  # name@version before the update ("" when unknown)
    model_to: str  # name@version asked for
    delta: bool
    bytes_sent: int
    blocks: int
    retransmits: int
    transfer_ms: float
    verify_ms: float  # signature and compatibility pre-check on the device
    switch_ms: float  # atomic switch
    result: str  # "ok", or what went wrong and whether the old model kept running
    t_s: float | None = None  # when, s since the run started, if known
    channel: str = "coap"  # the update channel: coap, grpc, websocket


@dataclass
class DeviceView:
    """Everything one run measured on one device."""

    name: str
    kind: str
    samples: dict[str, Samples] = field(default_factory=dict)
    scalars: dict[str, tuple[float | None, str]] = field(default_factory=dict)  # stored name -> (value, unit)
    counts: dict[str, int | None] = field(default_factory=dict)  # stored name -> observations behind it
    frames: FrameTrace | None = None
    telemetry: dict[str, TimeSeries] = field(default_factory=dict)
    faults: list[TimelineFault] = field(default_factory=list)
    ota: list[OtaTransfer] = field(default_factory=list)
    model_versions: list[str] = field(default_factory=list)
    decision_budget_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # stage failures and other remarks, for the report
    meter: str = ""  # the power meter behind the energy figures, as stored with them ("" without one)
    energy_na: str = ""  # why energy per decision is n/a although the device has a meter
    energy_windows: str = ""  # where the meter's decision windows came from (the marker, or the frames mapped)

    def series(self, source: str) -> Samples | None:
        """The samples named `source`, or None when this device has none."""
        return self.samples.get(source)


@dataclass
class RunView:
    """One run: its identity and its devices."""

    run_id: str
    started_at: str  # ISO 8601, UTC
    devices: dict[str, DeviceView] = field(default_factory=dict)
    label: str = ""
    status: str = ""  # e.g. "finished", "failed", "running"
    meta: dict[str, str] = field(default_factory=dict)  # fleet, bench version, baseline name...

"""What a replay run writes, and where: the sink protocol the replay owns.

The replay knows nothing of databases: a replay run (`ReplayRun`) hands devices, frame records, inputs,
measurements, histograms, faults, clock mappings and power-meter samples to a `RunSink`: its devices (`runs`), its
records (`frames`) and its measurements (`measures`). `bench.store.results.ResultStore` is the bench's sink (SQLite
or PostgreSQL); a test may pass anything with these parts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from bench.agent.frame import Frame
from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.measure.measurement import Measurement


class FrameSink(Protocol):
    """Takes frame records as they arrive, from the event loop, without blocking it."""

    def put(self, run_id: int, device: str, frame: Frame) -> None:
        """Queue one record (never blocks)."""

    def close(self) -> None:
        """Write everything queued; re-raises a write error."""


class DeviceSink(Protocol):
    """Which devices take part in a run, and how each ended."""

    def add_device(self, run_id: int, name: str, kind: str, info: dict[str, Any] | None = None) -> None:
        """Register a device in the run."""

    def update_device(
        self, run_id: int, name: str, *, status: str | None = None, detail: str | None = None, **info: Any
    ) -> None:
        """Set a device's status/detail and merge `info` into what is known of it."""


class RecordSink(Protocol):
    """Frame records, replayed inputs and clock mappings."""

    def frame_sink(self) -> FrameSink:
        """A writer for frame records."""

    def add_inputs(self, run_id: int, device: str, rows: Iterable[tuple[int, str, int | None, int]]) -> None:
        """The replayed inputs: (seq, channel, due_ns or None, sent_ns)."""

    def set_clock(
        self, run_id: int, device: str, offset_ns: float, drift_ppm: float, ref_ns: int, uncertainty_ns: float | None
    ) -> None:
        """The device clock mapping the run's figures used."""


class MeasureSink(Protocol):
    """What was measured on each device."""

    def add_measurements(self, run_id: int, device: str, measurements: Iterable[Measurement]) -> None:
        """A device's measurements."""

    def add_histograms(self, run_id: int, device: str, histograms: Iterable[Histogram]) -> None:
        """A device's histograms."""

    def add_faults(self, run_id: int, device: str, faults: Sequence[FaultEvent]) -> None:
        """A device's fault events."""

    def add_telemetry(self, run_id: int, device: str, rows: Iterable[tuple[int, str, float, str, str]]) -> int:
        """Time series of a device (t_ns, name, value, unit, source): its power meter's samples; how many."""


class RunSink(Protocol):
    """Where a replay run's results go: its devices, its records and its measurements."""

    @property
    def runs(self) -> DeviceSink:
        """The run's devices."""

    @property
    def frames(self) -> RecordSink:
        """Frame records, inputs, clock mappings."""

    @property
    def measures(self) -> MeasureSink:
        """Measurements, histograms, faults, telemetry."""

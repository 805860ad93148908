"""The device clock mapping the metrics put frame records (bench.agent.frame.Frame) on the bench clock with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class DeviceClock(Protocol):
    """Maps device microseconds to bench nanoseconds (bench.agent.clock.ClockSync fits)."""

    def to_bench_ns(self, device_us: int) -> int:
        """A device timestamp (us) on the bench clock (ns)."""


@dataclass(frozen=True)
class OffsetClock:
    """A fixed offset: bench_ns = device_us * 1000 - offset_ns (protocol.md's mapping without drift)."""

    offset_ns: int

    def to_bench_ns(self, device_us: int) -> int:
        """A device timestamp (us) on the bench clock (ns)."""
        return device_us * 1000 - self.offset_ns

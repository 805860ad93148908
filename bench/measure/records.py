"""The inputs of the metrics: frame records (as the agents send them) and the device clock mapping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from bench.agent.endpoint import FrameLike
from bench.agent.session import frame_fields

__all__ = ["DeviceClock", "Frame", "FrameLike", "OffsetClock"]


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


@dataclass(frozen=True)
class Frame:
    """One `frame` record: device times in us; `rx_ns` when the bench received it (bench clock)."""

    i: int
    vsync: int
    due: int | None = None
    ran: bool = False
    t0: int | None = None
    t1: int | None = None
    act: int | None = None
    p: float | None = None
    seq: int = -1
    skip: bool = False
    late: bool = False
    q: int = 0
    model: int | None = None
    rx_ns: int | None = None

    @classmethod
    def from_msg(cls, msg: dict[str, Any], rx_ns: int | None = None) -> Frame:
        """From a decoded `frame` message."""
        return cls(**frame_fields(msg), rx_ns=rx_ns)

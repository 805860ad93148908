"""The frame record: one `frame` message of an agent (docs/protocol.md), as the session reads it off the wire,
the replay hands it to the metrics, the store keeps it and reads it back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Frame:
    """One `frame` record: device times in us on the device clock; `rx_ns` when the bench received it (bench
    monotonic_ns; decision latency: bench.measure.latency, from the send times)."""

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
        """From a decoded `frame` message, typed, optional fields defaulted."""
        return cls(
            i=int(msg["i"]),
            vsync=int(msg["vsync"]),
            due=msg.get("due"),
            ran=bool(msg.get("ran", False)),
            t0=msg.get("t0"),
            t1=msg.get("t1"),
            act=msg.get("act"),
            p=msg.get("p"),
            seq=int(msg.get("seq", -1)),
            skip=bool(msg.get("skip", False)),
            late=bool(msg.get("late", False)),
            q=int(msg.get("q", 0)),
            model=msg.get("model"),
            rx_ns=rx_ns,
        )

    @property
    def infer_us(self) -> int | None:
        """Inference time on the device, when inference ran."""
        return self.t1 - self.t0 if self.ran and self.t0 is not None and self.t1 is not None else None

"""Sandbox faults reported by agents, with their timings mapped to the bench clock."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from bench.measure.records import DeviceClock


@dataclass(frozen=True)
class FaultEvent:
    """One `fault` message: kind, cause, models, and times (device us and bench ns)."""

    kind: str
    cause: str
    model_version: int | None
    prev_version: int | None
    t_switch_us: int | None
    t_fault_us: int | None
    t_fault_bench_ns: int | None
    since_switch_ms: float | None  # how long after the switch the fault came
    rollback_us: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _version(value: Any) -> int | None:
    return value.get("version") if isinstance(value, dict) else None


def fault_event(msg: dict[str, Any], clock: DeviceClock | None = None) -> FaultEvent:
    """A FaultEvent from a decoded `fault` message."""
    t_switch, t_fault = msg.get("t_switch"), msg.get("t_fault")
    return FaultEvent(
        kind=str(msg.get("kind", "unknown")),
        cause=str(msg.get("cause", "")),
        model_version=_version(msg.get("model")),
        prev_version=_version(msg.get("prev")),
        t_switch_us=t_switch,
        t_fault_us=t_fault,
        t_fault_bench_ns=clock.to_bench_ns(t_fault) if clock is not None and t_fault is not None else None,
        since_switch_ms=(t_fault - t_switch) / 1000 if t_switch is not None and t_fault is not None else None,
        rollback_us=msg.get("rollback_us"),
        detail=str(msg.get("detail", "")),
    )


def fault_counts(events: Iterable[FaultEvent]) -> Counter[str]:
    """Number of faults per kind."""
    return Counter(e.kind for e in events)

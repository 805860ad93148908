"""Where a replay run's time goes: its phases (opening the agents, each wave's start, play and stop, measuring),
each with its wall time and the devices in it. The nightly's summary prints them per session and per wave."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Phase:
    """One phase of a replay run: what it was, how long it took (wall seconds) and on which devices."""

    name: str
    seconds: float
    devices: tuple[str, ...]
    wave: int | None = None  # the wave it belongs to (1, 2, ...), None for the run's own phases
    detail: bool = False  # one device's part of a run phase (inside it, not after it)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"name": self.name, "seconds": round(self.seconds, 3), "devices": list(self.devices),
                "wave": self.wave, "detail": self.detail}  # fmt: skip

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Phase:
        """From `to_json`'s form."""
        return cls(str(doc["name"]), float(doc["seconds"]), tuple(doc.get("devices") or ()), doc.get("wave"),
                   bool(doc.get("detail")))  # fmt: skip


@dataclass
class PhaseTimer:
    """Times the phases of one replay run, in order."""

    phases: list[Phase] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str, devices: list[str], wave: int | None = None, *, detail: bool = False) -> Iterator[None]:
        """Time the block as phase `name` (kept also when the block raises); `detail`: one device's part of a
        phase timed as a whole too."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases.append(Phase(name, time.monotonic() - started, tuple(devices), wave, detail))

    def to_json(self) -> list[dict[str, Any]]:
        """JSON-ready form: the phases in the order they ran."""
        return [p.to_json() for p in self.phases]


def wave_seconds(phases: list[Phase]) -> dict[int, float]:
    """Each wave's wall time (its start, play and stop phases together)."""
    out: dict[int, float] = {}
    for p in phases:
        if p.wave is not None and not p.detail:
            out[p.wave] = out.get(p.wave, 0.0) + p.seconds
    return out

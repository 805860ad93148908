"""What a nightly stage reports: per device, whether it worked and what it measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.core.outcomes import Outcome


@dataclass
class DeviceOutcome:
    """What one stage did on one device."""

    ok: bool
    detail: str = ""
    skipped: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome | None = None  # the failure class (bench.core.outcomes); None: the stage's default for `ok`


@dataclass
class StageResult:
    """One stage over the devices still in the run."""

    name: str
    seconds: float
    devices: dict[str, DeviceOutcome]
    error: str = ""  # the stage itself failed (not one device)

    @property
    def ok(self) -> bool:
        """True when the stage worked on every device it ran on."""
        return not self.error and all(o.ok for o in self.devices.values())

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "name": self.name,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "devices": {k: _device_json(v) for k, v in self.devices.items()},
        }


def _device_json(outcome: DeviceOutcome) -> dict[str, Any]:
    data = asdict(outcome)
    data["outcome"] = outcome.outcome.to_json() if outcome.outcome is not None else None
    return data

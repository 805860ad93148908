"""What a nightly stage reports: per device, whether it worked and what it measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class DeviceOutcome:
    """What one stage did on one device."""

    ok: bool
    detail: str = ""
    skipped: bool = False
    data: dict[str, Any] = field(default_factory=dict)


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
            "devices": {k: asdict(v) for k, v in self.devices.items()},
        }

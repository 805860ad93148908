"""Power and reset of devices: one protocol (`protocol.PowerDriver`), one module per backend.

The fleet file's `power = { driver = NAME, ... }` table picks a backend from `BACKENDS`; `power_for(device)`
gives the device's PowerDriver (None when it has no `power` table). Serial boards' hard reset over
DTR/RTS is `bench.devices.serial_reset`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from bench.core.fields import driver_settings
from bench.power.command import CommandPower
from bench.power.labgrid import LabgridPower
from bench.power.protocol import PowerDriver, PowerError, PowerSpec, PowerState
from bench.power.uhubctl import UhubctlPower

BACKENDS: dict[str, type[PowerDriver]] = {
    "uhubctl": UhubctlPower,
    "command": CommandPower,
    "labgrid": LabgridPower,
}

__all__ = ["BACKENDS", "PowerDriver", "PowerError", "PowerSpec", "PowerState", "parse_power", "power_for"]


def parse_power(raw: Any, where: str, base_dir: Path) -> PowerSpec:
    """Validate a fleet file's `power` table into its backend's settings (`where` names the file and device for
    messages)."""
    drivers = {name: backend.SETTINGS for name, backend in BACKENDS.items()}
    name, settings = driver_settings(raw, "power", drivers, where, what="power driver")
    return PowerSpec(driver=name, settings=settings, base_dir=base_dir)


class Powered(Protocol):
    """What `power_for` reads of a fleet device (bench.config.fleet.Device, a layer above)."""

    @property
    def name(self) -> str: ...

    @property
    def power(self) -> PowerSpec | None: ...


def power_for(device: Powered) -> PowerDriver | None:
    """The PowerDriver of a fleet device, or None when its fleet entry has no `power` table."""
    spec = device.power
    if spec is None:
        return None
    return BACKENDS[spec.driver](device.name, spec)

"""Power and reset of devices: one protocol (`protocol.PowerDriver`), one module per backend.

The fleet file's `power = { driver = NAME, ... }` table picks a backend from `BACKENDS`; `power_for(device)`
gives the device's PowerDriver (None when it has no `power` table). Serial boards' hard reset over
DTR/RTS is `bench.devices.serial_reset`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.power.command import CommandPower
from bench.power.labgrid import LabgridPower
from bench.power.protocol import DEFAULT_OFF_S, PowerDriver, PowerError, PowerSpec, PowerState
from bench.power.uhubctl import UhubctlPower

BACKENDS: dict[str, type[PowerDriver]] = {
    "uhubctl": UhubctlPower,
    "command": CommandPower,
    "labgrid": LabgridPower,
}

__all__ = ["BACKENDS", "PowerDriver", "PowerError", "PowerSpec", "PowerState", "parse_power", "power_for"]


MAX_OFF_S = 600.0  # the longest a power cycle keeps a board off


def parse_power(raw: Any, where: str, base_dir: Path, defaults: dict[str, Any] | None = None) -> PowerSpec:
    """Validate a fleet file's `power` table (`where` names the device for messages). `defaults` fills
    options the table leaves out (e.g. the labgrid place from the device's `place`)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: field 'power': must be a table, e.g. power = {{ driver = \"uhubctl\", ... }}")
    name = raw.get("driver")
    if name not in BACKENDS:
        shown = "missing" if name is None else f"unknown driver {name!r}"
        raise ConfigError(f"{where}: field 'power.driver': {shown}", hint=f"drivers: {', '.join(BACKENDS)}")
    backend = BACKENDS[name]
    options: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("driver", "off_s"):
            continue
        if key not in backend.FIELDS:
            known = ", ".join(["off_s", *backend.FIELDS])
            raise ConfigError(
                f"{where}: field 'power.{key}': not a field of power driver {name!r}", hint=f"known: {known}"
            )
        want = backend.FIELDS[key]
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(f"{where}: field 'power.{key}': expected {want.__name__}, got {value!r}")
        pattern = backend.PATTERNS.get(key)
        if pattern is not None and not re.fullmatch(pattern, value):
            raise ConfigError(f"{where}: field 'power.{key}': {value[:40]!r} is not a {key} (e.g. 1-1.4)",
                              field=f"power.{key}")  # fmt: skip
        low, high = backend.RANGES.get(key, (None, None))
        if low is not None and not low <= value <= high:
            raise ConfigError(f"{where}: field 'power.{key}': {value!r} is outside {low:g}..{high:g}",
                              field=f"power.{key}")  # fmt: skip
        options[key] = value
    for key, value in (defaults or {}).items():
        if key in backend.FIELDS and value is not None:
            options.setdefault(key, value)
    missing = [k for k in backend.REQUIRED if k not in options]
    if missing:
        raise ConfigError(
            f"{where}: field 'power.{missing[0]}': missing",
            hint=f"power driver {name!r} needs {', '.join(backend.REQUIRED)}",
        )
    off_s = raw.get("off_s", DEFAULT_OFF_S)
    if isinstance(off_s, bool) or not isinstance(off_s, int | float) or not 0 <= off_s <= MAX_OFF_S:
        raise ConfigError(f"{where}: field 'power.off_s': expected seconds 0..{MAX_OFF_S:g}, got {off_s!r}")
    return PowerSpec(driver=name, options=options, off_s=float(off_s), base_dir=base_dir)


def power_for(device: Any) -> PowerDriver | None:
    """The PowerDriver of a fleet device, or None when its fleet entry has no `power` table."""
    spec: PowerSpec | None = getattr(device, "power", None)
    if spec is None:
        return None
    return BACKENDS[spec.driver](device.name, spec)

"""A device's `energy = { driver = ..., ... }` table: which power meter measures it, validated at load.

One typed settings class per driver; `parse_energy` checks every field against it (errors name the fleet file,
the device and the field). The meters themselves are `bench.energy`'s backends.

    energy = { driver = "ppk2", port = "/dev/ttyACM3", voltage_mv = 3300 }          # Nordic PPK2 (source meter)
    energy = { driver = "joulescope", device = "u/js220/002417" }                  # Joulescope JS110 / JS220
    energy = { driver = "tegrastats", interval_ms = 100, rail = "VDD_IN" }         # a Jetson's INA3221 rails
    energy = { driver = "pmic" }                                                   # a Pi 5's PMIC ADCs
    energy = { driver = "hwmon", power = "/sys/class/hwmon/hwmon2/power1_input" }  # any hwmon power file
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.core.errors import ConfigError
from bench.core.fields import typed


@dataclass(frozen=True)
class Ppk2Settings:
    """A Nordic Power Profiler Kit II: its serial port (a virtual board's is filled in when it starts), the
    supply it sources (source meter) or the supply it expects (ampere meter), in mV."""

    port: str | None = None
    voltage_mv: int = 3300
    mode: Literal["source", "ampere"] = "source"
    bin_us: int = 1000  # samples (100 kS/s) are averaged into bins this long


@dataclass(frozen=True)
class JoulescopeSettings:
    """A Joulescope JS110 / JS220 through pyjoulescope_driver: which one (a device path prefix, e.g.
    `u/js220/002417`; the first found when omitted) and the rate its statistics come at."""

    device: str | None = None
    frequency_hz: int = 1000


@dataclass(frozen=True)
class TegrastatsSettings:
    """A Jetson's on-board INA3221 rails through `tegrastats` on the device (over its SSH link)."""

    interval_ms: int = 1000
    rail: str = "VDD_IN"  # the rail that carries the whole module (VDD_IN on Orin, POM_5V_IN on Xavier/Nano)


@dataclass(frozen=True)
class PmicSettings:
    """A Raspberry Pi 5's PMIC rail currents and voltages through `vcgencmd pmic_read_adc` on the device."""

    interval_ms: int = 1000


@dataclass(frozen=True)
class HwmonSettings:
    """Any Linux hwmon sensor: a power file (uW), or a current file (mA) with a voltage file (mV) or a fixed
    voltage; read on the device (over SSH) or on the bench host (a sensor wired to a board's supply)."""

    power: str | None = None
    current: str | None = None
    voltage: str | None = None
    voltage_mv: float | None = None
    interval_ms: int = 100
    on: Literal["device", "bench"] = "device"


Settings = Ppk2Settings | JoulescopeSettings | TegrastatsSettings | PmicSettings | HwmonSettings
DRIVERS: dict[str, type] = {
    "ppk2": Ppk2Settings,
    "joulescope": JoulescopeSettings,
    "tegrastats": TegrastatsSettings,
    "pmic": PmicSettings,
    "hwmon": HwmonSettings,
}


@dataclass(frozen=True)
class EnergySpec:
    """A validated `energy` table."""

    driver: str
    settings: Settings
    base_dir: Path = Path(".")  # the fleet file's folder
    budget_mj: float | None = None  # the device's `energy_budget_mj`: the most one decision may take

    def with_port(self, port: str) -> EnergySpec:
        """A copy whose meter is on `port` (a virtual meter's pty, known once its board runs)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, port=port))  # type: ignore[arg-type]


def _field_type(hint: Any) -> Any:
    """The type `typed` checks for a settings field (`X | None` -> X)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def parse_energy(raw: Any, where: str, base_dir: Path) -> EnergySpec:
    """Validate a fleet file's `energy` table (`where` names the file and device for messages)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: field 'energy': must be a table, e.g. energy = {{ driver = \"ppk2\", ... }}")
    name = raw.get("driver")
    if name not in DRIVERS:
        shown = "missing" if name is None else f"unknown driver {name!r}"
        raise ConfigError(f"{where}: field 'energy.driver': {shown}", hint=f"drivers: {', '.join(DRIVERS)}")
    cls = DRIVERS[name]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key in raw:
        if key == "driver":
            continue
        if key not in hints:
            raise ConfigError(f"{where}: field 'energy.{key}': not a field of meter {name!r}",
                              hint=f"known: {', '.join(hints)}")  # fmt: skip
        values[key] = typed(raw, key, _field_type(hints[key]), f"{where}: energy", None)
        if isinstance(values[key], int | float) and not isinstance(values[key], bool) and values[key] <= 0:
            raise ConfigError(f"{where}: field 'energy.{key}': must be positive, got {values[key]!r}")
    settings = cls(**values)
    if isinstance(settings, HwmonSettings):
        if (settings.power is None) == (settings.current is None):
            raise ConfigError(f"{where}: field 'energy.power': give either power (a uW file) or current (a mA file)")
        if settings.current is not None and settings.voltage is None and settings.voltage_mv is None:
            raise ConfigError(f"{where}: field 'energy.voltage': a current file needs voltage (a mV file) or "
                              "voltage_mv")  # fmt: skip
    if isinstance(settings, Ppk2Settings) and not 800 <= settings.voltage_mv <= 5000:
        raise ConfigError(f"{where}: field 'energy.voltage_mv': the PPK2 sources 800..5000 mV, got "
                          f"{settings.voltage_mv}")  # fmt: skip
    return EnergySpec(driver=name, settings=settings, base_dir=base_dir)

"""A device's `energy = { driver = ..., ... }` table: which power meter measures it, validated at load.

One settings class per driver, declared as every setting is (bench.core.fields.Declared: each field with its
range or form); `parse_energy` makes it from the table (errors name the fleet file, the device and the field).
The meters themselves are `bench.energy`'s backends.

    energy = { driver = "ppk2", port = "/dev/ttyACM3", voltage_mv = 3300 }          # Nordic PPK2 (source meter)
    energy = { driver = "ppk2", port = "/dev/ttyACM3", logic_channel = 0 }          # D0 wired to the marker_gpio
    energy = { driver = "joulescope", device = "u/js220/002417" }                  # Joulescope JS110 / JS220
    energy = { driver = "tegrastats", interval_ms = 100, rail = "VDD_IN" }         # a Jetson's INA3221 rails
    energy = { driver = "pmic" }                                                   # a Pi 5's PMIC ADCs
    energy = { driver = "hwmon", power = "/sys/class/hwmon/hwmon2/power1_input" }  # any hwmon power file
    energy = { driver = "supply", interval_ms = 250 }                              # a virtual console's supply
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bench.core.fields import Declared, SettingError, driver_settings, ranged

PERIOD_MS = (1, 3_600_000)  # a meter's reading period: 1 ms to an hour


@dataclass(frozen=True)
class Ppk2Settings(Declared):
    """A Nordic Power Profiler Kit II: its serial port (a virtual board's is filled in when it starts), the
    supply it sources (source meter) or the supply it expects (ampere meter), in mV, and the logic input (D0-D7)
    wired to the device's `marker_gpio`, whose high runs are the decisions (docs/lab-control.md, "The inference
    marker")."""

    port: str | None = None
    voltage_mv: int = ranged(3300, 800, 5000)  # what the PPK2 can source
    mode: Literal["source", "ampere"] = "source"
    bin_us: int = ranged(1000, 10, 1_000_000)  # samples (100 kS/s) are averaged into bins this long
    logic_channel: int | None = ranged(None, 0, 7)  # D<n>; a bin also ends at each of its edges


@dataclass(frozen=True)
class JoulescopeSettings(Declared):
    """A Joulescope JS110 / JS220 through pyjoulescope_driver: which one (a device path prefix, e.g.
    `u/js220/002417`; the first found when omitted) and the rate its statistics come at."""

    device: str | None = None
    frequency_hz: int = ranged(1000, 1, 1_000_000)


@dataclass(frozen=True)
class TegrastatsSettings(Declared):
    """A Jetson's on-board INA3221 rails through `tegrastats` on the device (over its SSH link)."""

    interval_ms: int = ranged(1000, *PERIOD_MS)
    rail: str = "VDD_IN"  # the rail that carries the whole module (VDD_IN on Orin, POM_5V_IN on Xavier/Nano)


@dataclass(frozen=True)
class PmicSettings(Declared):
    """A Raspberry Pi 5's PMIC rail currents and voltages through `vcgencmd pmic_read_adc` on the device."""

    interval_ms: int = ranged(1000, *PERIOD_MS)


@dataclass(frozen=True)
class HwmonSettings(Declared):
    """Any Linux hwmon sensor: a power file (uW), or a current file (mA) with a voltage file (mV) or a fixed
    voltage; read on the device (over SSH) or on the bench host (a sensor wired to a board's supply)."""

    power: str | None = None
    current: str | None = None
    voltage: str | None = None
    voltage_mv: float | None = ranged(None, 0.001, 1_000_000)
    interval_ms: int = ranged(100, *PERIOD_MS)
    on: Literal["device", "bench"] = "device"

    def check(self) -> None:
        if (self.power is None) == (self.current is None):
            raise SettingError("power", "give either power (a uW file) or current (a mA file)")
        if self.current is not None and self.voltage is None and self.voltage_mv is None:
            raise SettingError("voltage", "a current file needs voltage (a mV file) or voltage_mv")


@dataclass(frozen=True)
class SupplySettings(Declared):
    """A lab supply meter on an emulated console's supply (bench.energy.supply): the virtual console's modelled
    one, whose readings its guest prints on its console, on its own clock, every `interval_ms`."""

    interval_ms: int = ranged(250, 50, 60_000)


Settings = Ppk2Settings | JoulescopeSettings | TegrastatsSettings | PmicSettings | HwmonSettings | SupplySettings
DRIVERS: dict[str, type[Declared]] = {
    "ppk2": Ppk2Settings,
    "joulescope": JoulescopeSettings,
    "tegrastats": TegrastatsSettings,
    "pmic": PmicSettings,
    "hwmon": HwmonSettings,
    "supply": SupplySettings,
}


MODELLED_FROM = "modelled from"  # how a virtual meter's name says its figures are modelled (the report looks for it)


def modelled_from(basis: str) -> str:
    """A virtual meter's "modelled from ..." phrase: what its figures are modelled from."""
    return f"{MODELLED_FROM} {basis}"


@dataclass(frozen=True)
class EnergySpec:
    """A validated `energy` table."""

    driver: str
    settings: Settings
    base_dir: Path = Path(".")  # the fleet file's folder
    budget_mj: float | None = None  # the device's `energy_budget_mj`: the most one decision may take
    modelled: str = ""  # a virtual meter: what its figures are modelled from (the report says so beside them)

    def with_port(self, port: str, modelled: str = "") -> EnergySpec:
        """A copy whose meter is on `port` (a virtual meter's pty, known once its board runs), modelled as
        `modelled` says."""
        settings = dataclasses.replace(self.settings, port=port)  # type: ignore[arg-type]
        return dataclasses.replace(self, settings=settings, modelled=modelled)


ON_DEVICE = ("tegrastats", "pmic")  # drivers read on the device, over its SSH link (and `hwmon` with on = "device")


def needs_connection(spec: EnergySpec) -> bool:
    """True when the meter is read on the device (over its SSH link)."""
    return spec.driver in ON_DEVICE or (isinstance(spec.settings, HwmonSettings) and spec.settings.on == "device")


def parse_energy(raw: object, where: str, base_dir: Path) -> EnergySpec:
    """Validate a fleet file's `energy` table (`where` names the file and device for messages)."""
    name, settings = driver_settings(raw, "energy", DRIVERS, where, what="meter")
    return EnergySpec(driver=name, settings=settings, base_dir=base_dir)

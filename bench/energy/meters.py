"""The meter registry: `meter_for(device)` picks the backend of the device's `energy` table."""

from __future__ import annotations

from typing import Any, Protocol

from bench.energy.hwmon import BenchHwmonMeter
from bench.energy.joulescope import JoulescopeMeter
from bench.energy.ppk2 import Ppk2Meter
from bench.energy.protocol import Meter, MeterError
from bench.energy.remote import DeviceHwmonMeter, PmicMeter, TegrastatsMeter
from bench.energy.spec import EnergySpec, needs_connection
from bench.energy.supply import supply_meter
from bench.links.spec import SshLink
from bench.links.ssh import SshConnection

ON_DEVICE = {"tegrastats": TegrastatsMeter, "pmic": PmicMeter}  # read over the device's SSH link (spec.ON_DEVICE)


class Metered(Protocol):
    """What `meter_for` reads of a fleet device (bench.config.fleet.Device, a layer above)."""

    @property
    def name(self) -> str: ...

    @property
    def link(self) -> Any: ...

    @property
    def energy(self) -> EnergySpec | None: ...


def meter_for(device: Metered, connection: SshConnection | None = None, driver: Any = None) -> Meter | None:
    """The (not yet started) meter of a fleet device; None without an `energy` table. `connection` is the
    device's SSH connection, for meters read on the device (one of its own over the device's SSH link when
    not given); `driver` the device's running driver, for a console's supply meter (bench.energy.supply)."""
    spec = device.energy
    if spec is None:
        return None
    if spec.driver == "supply":
        return supply_meter(device, driver)
    if needs_connection(spec):
        owns = connection is None and isinstance(device.link, SshLink)
        if owns:
            connection = SshConnection(device.name, device.link)
        if connection is None:
            raise MeterError(f"device {device.name!r}: meter {spec.driver!r} is read over SSH; the device has none",
                             hint="use a bench-side meter (ppk2, joulescope, hwmon with on = \"bench\")")  # fmt: skip
        cls = ON_DEVICE.get(spec.driver, DeviceHwmonMeter)
        return cls(device.name, spec, connection, owns=owns)
    if spec.driver == "ppk2":
        return Ppk2Meter(device.name, spec)
    if spec.driver == "joulescope":
        return JoulescopeMeter(device.name, spec)
    return BenchHwmonMeter(device.name, spec)

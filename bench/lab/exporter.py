"""`hilbench lab exporter-config`: the labgrid exporter YAML of one bench host, from the fleet file.

One group per device (named after it): a NetworkSerialPort for a virtual board (its own RFC 2217
server), a USBSerialPort with a udev match on the board's USB serial number for a real one (the exporter
serves it through ser2net on a new port per acquire), a NetworkService for an SSH board. The file is a
Jinja2 template to labgrid: comments are written with `##` (a line starting with `#` is a statement).
"""

from __future__ import annotations

import yaml

from bench.config.fleet import Device, Fleet, Link
from bench.config.kinds import serial_baud
from bench.core.errors import ConfigError


def host_devices(fleet: Fleet, host: str) -> list[Device]:
    """The devices whose place is exported by bench host `host` (ConfigError naming the known hosts)."""
    devices = [d for d in fleet if d.lab is not None and d.lab.host == host]
    if not devices:
        hosts = sorted({d.lab.host for d in fleet if d.lab is not None and d.lab.host})
        known = f"bench hosts in this fleet: {', '.join(hosts)}" if hosts else "no device of this fleet has lab_host"
        raise ConfigError(
            f"{fleet.path}: no device has lab_host = {host!r}",
            hint=f'{known} (a device shared through labgrid names its bench host: lab_host = "NAME")',
        )
    return devices


def exporter_config(fleet: Fleet, host: str, served: dict[str, Link] | None = None, address: str | None = None) -> str:
    """The exporter YAML for `host`. `served` gives the links of the virtual devices running there;
    `address` replaces their loopback host in what is published (how other hosts reach them)."""
    served = served or {}
    groups = {d.name: _resources(fleet, d, served.get(d.name), address) for d in host_devices(fleet, host)}
    header = f"## labgrid exporter config of bench host {host}, written by `hilbench lab exporter-config`\n"
    header += f"## from {fleet.path}; run: labgrid-exporter -c COORDINATOR -n {host} THIS_FILE\n"
    return header + yaml.safe_dump(groups, sort_keys=False)


def _resources(fleet: Fleet, dev: Device, served: Link | None, address: str | None) -> dict:
    where = f"{fleet.path}: device {dev.name!r}"
    baud = (dev.lab.baud if dev.lab is not None else None) or serial_baud(dev.settings)
    if dev.virtual:
        if served is None:
            raise ConfigError(
                f"{where}: virtual, so its port is known only while it runs",
                hint="run `hilbench lab serve --host HOST` on the bench host (it writes this config itself)",
            )
        return served.lab_resource(address, baud)
    return dev.kind_info.link.lab_export(dev, where, baud)

"""`hilbench lab exporter-config`: the labgrid exporter YAML of one bench host, from the fleet file.

One group per device (named after it): a NetworkSerialPort for a virtual board (its own RFC 2217
server), a USBSerialPort with a udev match on the board's USB serial number for a real one (the exporter
serves it through ser2net on a new port per acquire), a NetworkService for an SSH board. The file is a
Jinja2 template to labgrid: comments are written with `##` (a line starting with `#` is a statement).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import yaml

from bench.errors import ConfigError
from bench.fleet import Device, Fleet, Link, SerialLink, SshLink
from bench.kinds import KINDS


def host_devices(fleet: Fleet, host: str) -> list[Device]:
    """The devices whose place is exported by bench host `host` (ConfigError naming the known hosts)."""
    devices = [d for d in fleet if d.lab is not None and d.lab.host == host]
    if not devices:
        hosts = sorted({d.lab.host for d in fleet if d.lab is not None and d.lab.host})
        raise ConfigError(
            f"{fleet.path}: no device has lab_host = {host!r}", hint=f"bench hosts in this fleet: {', '.join(hosts)}"
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
    serial = KINDS[dev.kind].link == "serial"
    baud = int(dev.extra.get("baud") or dev.settings.get("baud", 115200))
    if dev.virtual:
        if served is None:
            raise ConfigError(
                f"{where}: virtual, so its port is known only while it runs",
                hint="run `hilbench lab serve --host HOST` on the bench host (it writes this config itself)",
            )
        if isinstance(served, SerialLink):
            url = urlsplit(served.url)
            return {"NetworkSerialPort": {"host": address or url.hostname, "port": url.port, "speed": baud,
                                          "protocol": "rfc2217"}}  # fmt: skip
        if isinstance(served, SshLink):
            return {"NetworkService": {"address": address or served.host, "username": served.user, "port": served.port}}
        raise ConfigError(f"{where}: kind {dev.kind} cannot be exported")
    if serial:
        usb_serial = dev.extra.get("usb_serial")
        if not usb_serial:
            raise ConfigError(
                f"{where}: field 'usb_serial': missing",
                hint="give the board's USB serial number (udevadm info /dev/ttyACM0 | grep ID_SERIAL_SHORT)",
            )
        return {"USBSerialPort": {"match": {"ID_SERIAL_SHORT": str(usb_serial)}, "speed": baud}}
    local = dev.lab.local if dev.lab is not None else None
    if not isinstance(local, SshLink):
        raise ConfigError(f"{where}: field 'ssh': missing", hint='ssh = "user@address:22", as its bench host sees it')
    return {"NetworkService": {"address": local.host, "username": local.user, "port": local.port}}

"""The link a labgrid place yields: its published resources turned into the bench's own link types.

Drivers only ever see a SerialLink or SshLink; nothing past this module knows about labgrid.
"""

from __future__ import annotations

from bench.errors import DeviceUnreachable
from bench.fleet import Device, Link, SerialLink, SshLink
from bench.kinds import KINDS
from bench.lab.client import Resource

SERIAL_CLASSES = ("NetworkSerialPort",)  # USBSerialPort/RawSerialPort are published as NetworkSerialPort
SSH_CLASSES = ("NetworkService",)


def serial_url(params: dict) -> str:
    """pyserial URL for a NetworkSerialPort (`ign_set_control`: ser2net does not answer line changes)."""
    host, port = params["host"], int(params["port"])
    if params.get("protocol", "rfc2217") == "raw":
        return f"socket://{host}:{port}"
    return f"rfc2217://{host}:{port}?ign_set_control"


def link_from_resources(device: Device, place: str, resources: list[Resource]) -> Link:
    """`device`'s link from the resources of its acquired `place`."""
    link_kind = KINDS[device.kind].link
    wanted = SERIAL_CLASSES if link_kind == "serial" else SSH_CLASSES
    found = [r for r in resources if r.cls in wanted]
    if not found:
        have = ", ".join(sorted(f"{r.cls} {r.exporter}/{r.group}" for r in resources)) or "none available"
        raise DeviceUnreachable(
            f"device {device.name!r}: labgrid place {place!r} has no {' or '.join(wanted)} ({have})",
            hint="is the bench host's exporter running? see `hilbench lab exporter-config`",
        )
    params = found[0].params
    if link_kind == "serial":
        baud = int(device.extra.get("baud") or params.get("speed") or device.settings.get("baud", 115200))
        return SerialLink(url=serial_url(params), baud=baud)
    return SshLink(
        user=params.get("username") or "root",
        host=params["address"],
        port=int(params.get("port", 22)),
        key=device.extra.get("key"),
        host_key=device.extra.get("host_key"),
        known_hosts=device.extra.get("known_hosts"),
    )

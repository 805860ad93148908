"""The link a labgrid place yields: its published resources turned into the bench's own link types.

Drivers only ever see the link types of bench/links/spec.py; nothing past this module knows about labgrid.
"""

from __future__ import annotations

from bench.config.fleet import Device, Link
from bench.core.errors import DeviceUnreachable
from bench.lab.client import LabResource


def link_from_resources(device: Device, place: str, resources: list[LabResource]) -> Link:
    """`device`'s link from the resources of its acquired `place`."""
    family = device.kind_info.link
    wanted = family.lab_classes
    found = [r for r in resources if r.cls in wanted]
    if not found:
        have = ", ".join(sorted(f"{r.cls} {r.exporter}/{r.group}" for r in resources)) or "none available"
        raise DeviceUnreachable(
            f"device {device.name!r}: labgrid place {place!r} has no {' or '.join(wanted)} ({have})",
            hint="is the bench host's exporter running? see `hilbench lab exporter-config`",
        )
    return family.from_lab(device, found[0].params)

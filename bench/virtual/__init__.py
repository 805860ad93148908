"""Virtual devices: real-protocol stand-ins for boards, started for fleet devices marked `virtual = true`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Protocol

from bench.config.fleet import Device, Link
from bench.config.kinds import KINDS
from bench.core.paths import state_dir
from bench.energy.spec import Ppk2Settings, needs_connection
from bench.provision.controls import BoardControls
from bench.virtual import uplinks
from bench.virtual.usb_hubs import plug, unplug


class VirtualDevice(Protocol):
    """A running stand-in for one device."""

    async def start(self) -> Link:
        """Start serving; return the link the bench should use to reach it."""

    async def stop(self) -> None:
        """Stop serving and release every process and port."""

    def urls(self) -> dict[str, str]:
        """Every way to reach it (e.g. rfc2217, socket, pty for a board; ssh for a Linux device), and
        `control`: its control API (power off/on, hang), which its hub port switches."""


def has_virtual(kind: str) -> bool:
    """True when the bench can stand in for a device of `kind`."""
    return kind in KINDS and KINDS[kind].virtual is not None


def make_virtual(device: Device) -> VirtualDevice:
    """A (not yet started) virtual device for `device`."""
    return device.kind_info.virtual_class()(device, state_dir() / device.name)


def board_controls(running: dict[str, VirtualDevice]) -> dict[str, BoardControls]:
    """Power and storage controls of the running stand-ins that have them (virtual Linux boards), by name."""
    return {name: v.controls() for name, v in running.items() if callable(getattr(v, "controls", None))}


def with_meter(device: Device, stand_in: VirtualDevice) -> Device:
    """The device with what its meter's figures are modelled from (the stand-in's `meter_modelled`), and the meter's
    port filled in when the stand-in serves a virtual one of that driver (the virtual ESP32-C6's PPK2) and the
    fleet file names no port. A meter read on a virtual Linux board (its PMIC, its hwmon files) is the stand-in's."""
    spec = device.energy
    if spec is None:
        return device
    modelled = getattr(stand_in, "meter_modelled", "")
    url = stand_in.urls().get(spec.driver)
    if url is not None and isinstance(spec.settings, Ppk2Settings) and spec.settings.port is None:
        return dataclasses.replace(device, energy=spec.with_port(url, modelled))
    if modelled and needs_connection(spec):
        return dataclasses.replace(device, energy=dataclasses.replace(spec, modelled=modelled))
    return device


def attach(device: Device, stand_in: VirtualDevice) -> None:
    """The started `stand_in` serves `device`: its power control is plugged in, and its network reaches the ports
    the update path grants it (bench.virtual.uplinks)."""
    plug(state_dir(), device, stand_in.urls().get("control"))
    uplinks.register(device.name, stand_in)


def detach(device: Device) -> None:
    """`device`'s stand-in is stopping: unplugged, and no longer granted ports."""
    unplug(state_dir(), device)
    uplinks.unregister(device.name)


@contextlib.asynccontextmanager
async def virtual_fleet(
    devices: list[Device],
) -> AsyncIterator[tuple[list[Device], dict[str, VirtualDevice]]]:
    """Start the virtual devices among `devices` (kinds that have one) and yield the devices with
    their links filled in, plus the running stand-ins by name. Everything is stopped on exit."""
    running: dict[str, VirtualDevice] = {}
    resolved: list[Device] = []
    try:
        # a device in a labgrid lab is served by its bench host (`hilbench lab serve`), never by the job
        wanted = [d for d in devices if d.virtual and d.lab is None and has_virtual(d.kind)]
        stand_ins = {d.name: make_virtual(d) for d in wanted}
        links = await asyncio.gather(*(v.start() for v in stand_ins.values()), return_exceptions=True)
        for (name, vdev), link in zip(stand_ins.items(), links, strict=True):
            if isinstance(link, BaseException):
                raise link
            running[name] = vdev
        for dev in wanted:
            if dev.name in running:
                attach(dev, running[dev.name])
        by_name = dict(zip(stand_ins, links, strict=True))
        resolved = [with_meter(d.with_link(by_name[d.name]), running[d.name]) if d.name in by_name else d
                    for d in devices]  # fmt: skip
        yield resolved, running
    finally:
        for dev in devices:
            if dev.name in running:
                with contextlib.suppress(Exception):  # every stand-in is stopped, even when one would not unplug
                    detach(dev)
        await asyncio.gather(*(v.stop() for v in running.values()), return_exceptions=True)

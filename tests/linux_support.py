"""Test support for Linux boards: virtual Jetson / Pi 5 devices behind real sshd, on a long-lived loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from bench.fleet import Device, load_fleet
from bench.loop_thread import LoopThread
from bench.virtual import make_virtual
from bench.virtual.linux import VirtualLinuxDevice

LINUX_KINDS = ("jetson-orin-nx", "pi5")


@dataclass
class RunningBoard:
    """A started virtual board: the fleet device with its SSH link, the stand-in, and the loop it runs on."""

    device: Device
    virtual: VirtualLinuxDevice
    loop: LoopThread


@contextlib.contextmanager
def virtual_board(kind: str) -> Iterator[RunningBoard]:
    """Start the bundled fleet's virtual board of `kind`; stop it (and everything it runs) afterwards."""
    device = next(d for d in load_fleet() if d.kind == kind)
    loop = LoopThread()
    stand_in = make_virtual(device)
    assert isinstance(stand_in, VirtualLinuxDevice)
    try:
        link = loop.run(stand_in.start(), timeout_s=60)
        yield RunningBoard(device.with_link(link), stand_in, loop)
    finally:
        with contextlib.suppress(Exception):
            loop.run(stand_in.stop(), timeout_s=30)
        loop.close()

"""Test support for Linux boards: virtual Jetson / Pi 5 devices behind real sshd, on a long-lived loop."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench.config.fleet import Device, load_fleet
from bench.core.loop_thread import LoopThread
from bench.devices import Driver, driver_for
from bench.virtual.linux import VirtualLinuxDevice

T = TypeVar("T")

LINUX_KINDS = ("jetson-orin-nx", "pi5")


@dataclass
class RunningBoard:
    """A started virtual board: the fleet device with its SSH link, the stand-in, and the loop it runs on."""

    device: Device
    virtual: VirtualLinuxDevice
    loop: LoopThread

    def drive(
        self, use: Callable[[Driver], Awaitable[T]], device: Device | None = None, timeout_s: float | None = None
    ) -> T:
        """`use(driver)` on the board's loop, with a fresh driver of `device` (by default the board's own, so
        a test may change its settings), closed after."""
        driver = driver_for(device or self.device)

        async def go() -> T:
            try:
                return await use(driver)
            finally:
                await driver.close()

        return self.loop.run(go(), timeout_s=timeout_s)


def loopback(device: Device) -> Device:
    """The bundled fleet's virtual Linux board as the fast loopback-sshd stand-in instead of an aarch64 guest
    (no OS image, the kind's default settings: none of the guests' allowances). For tests of the SSH path."""
    return dataclasses.replace(device, os=None, settings=device.kind_info.defaults())


def loopback_fleet(path: Path, kinds: tuple[str, ...] = LINUX_KINDS) -> Path:
    """A fleet file at `path` with the bundled fleet's boards of `kinds` as loopback stand-ins."""
    body = "".join(
        f'[[device]]\nname = "{d.name}"\nkind = "{d.kind}"\nvirtual = true\n' for d in load_fleet() if d.kind in kinds
    )
    path.write_text(body)
    return path


@contextlib.contextmanager
def virtual_board(kind: str) -> Iterator[RunningBoard]:
    """Start the bundled fleet's virtual board of `kind` (loopback sshd) as a blank board in a folder of its own
    (other tests' deploys to the shared board state do not leak in); stop it (and everything it runs)."""
    device = loopback(next(d for d in load_fleet() if d.kind == kind))
    loop = LoopThread()
    with tempfile.TemporaryDirectory(prefix="hilbench-board-") as state:
        stand_in = device.kind_info.virtual_class()(device, Path(state) / device.name)
        assert isinstance(stand_in, VirtualLinuxDevice)
        try:
            link = loop.run(stand_in.start(), timeout_s=60)
            yield RunningBoard(device.with_link(link), stand_in, loop)
        finally:
            with contextlib.suppress(Exception):
                loop.run(stand_in.stop(), timeout_s=30)
            loop.close()

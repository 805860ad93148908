"""Drivers held across several users in a row, as the nightly's stages after the flash: one driver per device, whose
agent (and, for a QEMU console, the guest it runs on) stays up between users. Each user opens the agent and, when
done, releases it (`Driver.release_agent`), which closes only its link; `close` stops them all at the end.

What it saves is a Linux guest's agent start (its Python, numpy and tflite imports under QEMU -icount: 9-14 s) and
the console's boot (12-17 s) in each OTA stage after the replay (docs/replay.md, "Waves and where the time goes").
A user that must start the agent afresh (new files deployed) stops it through `close_agent`; the next open starts
it.

A replay asks for a fresh agent (`driver(device, fresh=True)`): on the icount guests a model loaded again within a
running agent (a cold start, an update) ran its inference at one of two instruction counts, 930 or 1360 us on pi5-1,
and could change level mid-session, where an agent that has loaded its model once held 1355-1366 us night after
night. So each replay session measures a new agent, and the agent of the last one serves the OTA stages.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from bench.config.fleet import Device
from bench.devices import driver_for
from bench.devices.base import Driver


class HeldDrivers:
    """One held driver per device (`driver`), all stopped by `close`."""

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self._drivers: dict[str, Driver] = {}

    async def driver(self, device: Device, *, fresh: bool = False) -> Driver:
        """The held driver of `device`: the one already held, unless the device changed (a lab place relinked to
        a new port, another model put on it for an attribution), whose agent is then stopped first: a board
        never runs two agents. `fresh`: the held agent is stopped, so the next open starts a new one (a replay
        measures an agent that has loaded its model once, module docstring)."""
        held = self._drivers.pop(device.name, None)
        if held is not None and held.device == device:
            self._drivers[device.name] = held
            if fresh:
                await held.close_agent()
            return held
        if held is not None:
            await _stop(held)
        driver = driver_for(device, log_dir=self.log_dir)
        driver.keep_agent = True
        self._drivers[device.name] = driver
        return driver

    async def close(self) -> None:
        """Stop every held agent (and a console's guest), also when a stop fails."""
        drivers = list(self._drivers.values())
        self._drivers.clear()
        await asyncio.gather(*(_stop(d) for d in drivers))


async def driver_of(
    device: Device, drivers: HeldDrivers | None, log_dir: Path | None = None, *, fresh: bool = False
) -> Driver:
    """`device`'s held driver when `drivers` holds them (`HeldDrivers.driver`), else a new one of its own."""
    if drivers is not None:
        return await drivers.driver(device, fresh=fresh)
    return driver_for(device, log_dir=log_dir)


async def _stop(driver: Driver) -> None:
    """Stop the driver's agent for good (a failure is left to the fleet's teardown: the device may be gone)."""
    driver.keep_agent = False
    with contextlib.suppress(Exception):
        await driver.close_agent()

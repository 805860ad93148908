"""Held drivers (bench.devices.held): one per device across users, the agent kept up between them, stopped once a
device changes and at the end."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from bench.config.fleet import Device
from bench.config.kinds import KINDS
from bench.devices.base import Driver, StepResult
from bench.devices.held import HeldDrivers

EVENTS: list[tuple[str, str]] = []  # (device name, what the driver was asked): "open", "drop", "stop"


class CountingDriver(Driver):
    """Records what it is asked to do with its agent."""

    async def flash(self, progress=None) -> list[StepResult]:
        return []

    async def open_agent(self):
        EVENTS.append((self.device.name, "open"))

    async def drop_link(self) -> None:
        EVENTS.append((self.device.name, "drop"))

    async def close_agent(self) -> None:
        EVENTS.append((self.device.name, "stop"))
        if self.device.description == "stop fails":
            raise OSError("device gone")


@pytest.fixture
def devices(monkeypatch: pytest.MonkeyPatch) -> list[Device]:
    monkeypatch.setitem(KINDS, "pi5", dataclasses.replace(KINDS["pi5"], driver=f"{__name__}:CountingDriver"))
    EVENTS.clear()
    return [Device(f"p{i}", "pi5", None) for i in range(2)]


def test_a_held_driver_is_reused_and_its_release_keeps_the_agent(devices: list[Device]) -> None:
    async def go() -> None:
        held = HeldDrivers()
        first = await held.driver(devices[0])
        await first.open_agent()
        await first.release_agent()
        again = await held.driver(devices[0])
        assert again is first and again.keep_agent
        await again.release_agent()
        await held.close()
        assert not first.keep_agent

    asyncio.run(go())
    assert EVENTS == [("p0", "open"), ("p0", "drop"), ("p0", "drop"), ("p0", "stop")]


def test_a_fresh_agent_stops_the_held_one_and_keeps_the_driver(devices: list[Device]) -> None:
    async def go() -> None:
        held = HeldDrivers()
        first = await held.driver(devices[0], fresh=True)  # nothing held yet: nothing to stop
        await first.open_agent()
        await first.release_agent()
        assert await held.driver(devices[0], fresh=True) is first
        await held.close()

    asyncio.run(go())
    assert EVENTS == [("p0", "open"), ("p0", "drop"), ("p0", "stop"), ("p0", "stop")]


def test_a_driver_not_held_stops_its_agent_on_release(devices: list[Device]) -> None:
    driver = CountingDriver(devices[0])
    asyncio.run(driver.release_agent())
    assert EVENTS == [("p0", "stop")]


def test_a_changed_device_gets_a_new_driver_after_the_old_agent_stopped(devices: list[Device]) -> None:
    other_model = dataclasses.replace(devices[0], description="another model")

    async def go() -> tuple[Driver, Driver]:
        held = HeldDrivers()
        old = await held.driver(devices[0])
        new = await held.driver(other_model)
        await held.close()
        return old, new

    old, new = asyncio.run(go())
    assert new is not old and new.device == other_model
    assert EVENTS == [("p0", "stop"), ("p0", "stop")]  # the old agent before the new driver, the new one at close


def test_close_stops_every_agent_even_when_one_stop_fails(devices: list[Device]) -> None:
    failing = dataclasses.replace(devices[0], description="stop fails")

    async def go() -> None:
        held = HeldDrivers()
        await held.driver(failing)
        await held.driver(devices[1])
        await held.close()

    asyncio.run(go())
    assert sorted(EVENTS) == [("p0", "stop"), ("p1", "stop")]

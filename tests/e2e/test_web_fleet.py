"""Web devices in a fleet: one headless Chromium for all of them, a page per device, each its own agent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.agent.session import AgentSession, LoopStart
from bench.config.fleet import load_fleet
from bench.devices import driver_for
from bench.virtual import virtual_fleet

pytestmark = pytest.mark.e2e


def test_two_web_devices_share_one_browser_with_a_page_each(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HILBENCH_STATE_DIR", str(tmp_path / "state"))
    fleet = tmp_path / "fleet.toml"
    fleet.write_text("".join(f'[[device]]\nname = "w{k}"\nkind = "web"\nvirtual = true\n' for k in (1, 2)))

    async def collect(s: AgentSession) -> list:
        return [r async for r in s.frames(timeout=10)]

    async def main() -> tuple[set[str], list[dict]]:
        async with virtual_fleet(load_fleet(fleet).devices) as (devices, _):
            drivers = [driver_for(d) for d in devices]
            for driver in drivers:
                assert all(step.ok for step in await driver.flash())
            sessions = [
                await AgentSession.open(await driver.open_agent(), device=driver.device.name, timeout=15)
                for driver in drivers
            ]
            infos = [await s.stats() for s in sessions]
            for s in sessions:
                await s.start(LoopStart(fps=30, vsync_hz=30, frames=10))
            counts = await asyncio.gather(*(collect(s) for s in sessions))
            assert [len(c) for c in counts] == [10, 10]
            for s, driver in zip(sessions, drivers, strict=True):
                await s.close()
                await driver.close_agent()
            return {d.link.devtools for d in devices}, infos

    links, infos = asyncio.run(main())
    assert len(links) == 1  # one browser
    assert all(i["loads"] == 1 for i in infos)

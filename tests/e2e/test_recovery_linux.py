"""End to end: power control of a virtual Linux board (a real sshd). Its hub port's power cycle kills
everything running on it and sshd comes back on the same address; a hung board (every process frozen)
is brought back by the ladder's power cycle, the steps it cannot do being passed over."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.devices.linux import LinuxDriver
from bench.power import PowerState, power_for
from bench.recovery.ladder import answers, recover
from bench.store.results import open_store
from bench.virtual import virtual_fleet
from bench.virtual.linux import processes_in
from tests.conftest import alive

pytestmark = pytest.mark.e2e

UHUBCTL = Path(__file__).resolve().parents[2] / "bench" / "virtual" / "host_tools" / "uhubctl"


def test_power_cycle_kills_a_linux_boards_processes_and_the_ladder_recovers_a_hung_one(tmp_path: Path) -> None:
    fleet_file = tmp_path / "fleet.toml"
    fleet_file.write_text(
        f"""
[[device]]
name = "pi5-p"
kind = "pi5"
virtual = true
power = {{ driver = "uhubctl", location = "4-1", port = 3, uhubctl = "{UHUBCTL}", off_s = 0.2 }}
"""
    )
    fleet = load_fleet(fleet_file)
    store = open_store(tmp_path / "r.sqlite")

    async def scenario():
        async with virtual_fleet(list(fleet.devices)) as (devices, running):
            device = devices[0]
            virtual = running["pi5-p"]
            power = power_for(device)
            assert power is not None and await power.status() == PowerState.ON
            driver = LinuxDriver(device)
            await driver.flash()
            session = await answers(driver, keep_open=True)
            assert session is not None
            pid = driver.agent.pid
            assert alive(pid)
            link_before = virtual.link()
            await power.cycle()
            await session.close()
            gone = not alive(pid) and not processes_in(virtual.root)
            link_after = virtual.link()
            await driver.close()
            # sshd is back on the same address; the agent is started again on request
            fresh = LinuxDriver(device)
            await answers(fresh)
            await fresh.close()
            # a hang: every process of the board frozen; the ladder passes what a Linux board cannot do
            assert (await virtual.control("hang"))["frozen"] > 0
            result = await recover(device, "test: hung", store=store, check_timeout_s=5.0)
            return gone, link_before, link_after, result

    gone, link_before, link_after, result = asyncio.run(scenario())
    assert gone, "the power cycle killed the agent and everything else running on the board"
    assert link_after == link_before, "sshd came back on the same address, with the same host key"
    assert result.recovered and result.step == "power_cycle", result.to_json()
    tried = {s.step: s.tried for s in result.steps}
    assert tried == {"restart_agent": True, "soft_reset": False, "hard_reset": False, "power_cycle": True}
    assert [e["event"] for e in store.health.events("pi5-p")] == ["failure", "recovered"]
    store.close()

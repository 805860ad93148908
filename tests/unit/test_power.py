"""Power backends and the fleet's `power` table: validation, uhubctl's output, lab commands."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.power import PowerError, PowerState, power_for
from bench.power.uhubctl import parse_status
from tests.conftest import fleet_refusal

UHUBCTL_OUT = """Current status for hub 1-1.4 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]
  Port 1: 0503 power highspeed enable connect [303a:1001 Espressif USB JTAG/serial debug unit]
  Port 2: 0100 power
Sent power off request
New status for hub 1-1.4 [2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]
  Port 1: 0000 off
  Port 2: 0100 power
"""


def test_uhubctl_status_is_the_last_line_for_the_port() -> None:
    assert parse_status(UHUBCTL_OUT, 1) == PowerState.OFF  # the "New status" after the change
    assert parse_status(UHUBCTL_OUT, 2) == PowerState.ON
    assert parse_status(UHUBCTL_OUT, 3) == PowerState.UNKNOWN


def _fleet(tmp_path: Path, power: str, extra: str = "") -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(f'{extra}\n[[device]]\nname = "b1"\nkind = "esp32c6"\nport = "/dev/ttyACM0"\npower = {power}\n')
    return path


@pytest.mark.parametrize(
    ("power", "says"),
    [
        ('{ location = "1-1", port = 2 }', "power.driver': missing"),
        ('{ driver = "relay" }', "unknown driver 'relay'"),
        ('{ driver = "uhubctl", location = "1-1" }', "power.port': missing"),
        ('{ driver = "uhubctl", location = "1-1", port = "2" }', "power.port': expected int"),
        ('{ driver = "uhubctl", location = "1-1", port = 2, pin = 4 }', "power.pin': not a field"),
        ('{ driver = "command", on = "x" }', "power.off': missing"),
        ('{ driver = "command", on = "x", off = "y", off_s = -1 }', "power.off_s'"),
        ('{ driver = "labgrid" }', "needs a named place"),
        ('"uhubctl"', "must be a table"),
    ],
)
def test_bad_power_tables_name_file_device_and_field(tmp_path: Path, power: str, says: str) -> None:
    refusal = fleet_refusal(_fleet(tmp_path, power))
    assert "'b1'" in refusal and says in refusal


def test_labgrid_power_takes_the_place_and_coordinator(tmp_path: Path) -> None:
    path = tmp_path / "fleet.toml"
    path.write_text(
        '[lab]\ncoordinator = "lab:20408"\n[[device]]\nname = "b1"\nkind = "esp32c6"\nplace = "desk-3"\n'
        'lab_host = "bench-a"\npower = { driver = "labgrid" }\n'
    )
    dev = load_fleet(path).get("b1")
    assert dev.power is not None and (dev.power.settings.place, dev.power.settings.coordinator) == (
        "desk-3",
        "lab:20408",
    )
    assert power_for(dev).where == "labgrid place desk-3"


def test_command_power_runs_the_labs_scripts(tmp_path: Path) -> None:
    state = tmp_path / "relay"
    on = f"echo on > {state}; echo $HILBENCH_DEVICE > {tmp_path / 'who'}"
    power = f'{{ driver = "command", on = "{on}", off = "echo off > {state}", status = "cat {state}", off_s = 0 }}'
    dev = load_fleet(_fleet(tmp_path, power)).get("b1")
    driver = power_for(dev)

    async def scenario():
        await driver.off()
        off = await driver.status()
        await driver.cycle()
        return off, await driver.status()

    assert asyncio.run(scenario()) == (PowerState.OFF, PowerState.ON)
    assert (tmp_path / "who").read_text().strip() == "b1"


def test_command_power_failures_are_power_errors(tmp_path: Path) -> None:
    power = '{ driver = "command", on = "echo relay busy >&2; exit 4", off = "sleep 5", timeout_s = 0.3 }'
    driver = power_for(load_fleet(_fleet(tmp_path, power)).get("b1"))
    with pytest.raises(PowerError, match="exited 4: relay busy"):
        asyncio.run(driver.on())
    with pytest.raises(PowerError, match=r"did not finish within 0\.3 s"):
        asyncio.run(driver.off())
    no_status = power_for(load_fleet(_fleet(tmp_path, '{ driver = "command", on = "true", off = "true" }')).get("b1"))
    assert asyncio.run(no_status.status()) == PowerState.UNKNOWN


def test_uhubctl_power_with_a_missing_tool_says_so(tmp_path: Path) -> None:
    power = '{ driver = "uhubctl", location = "1-1", port = 2, uhubctl = "/nonexistent/uhubctl" }'
    driver = power_for(load_fleet(_fleet(tmp_path, power)).get("b1"))
    with pytest.raises(PowerError, match="cannot run /nonexistent/uhubctl") as err:
        asyncio.run(driver.status())
    assert "installed" in str(err.value)

"""A lab supply meter on an emulated console's supply: the virtual console's, modelled from its counted busy time.

When its fleet entry has `energy = { driver = "supply" }`, the console's driver boots it with `npc_supply_ms`, and
its /init prints one reading a period on the console: `NPC-SUPPLY <uptime s> <mW>`, the console's power since the
reading before (usr/lib/npc-board/rails: its busy time per core, the console's figures in
firmware/switch-arm64/power.json). The meter follows the console through the driver, so its samples are on the
console's own clock, the one its frames carry: on an icount guest, the counted one."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from bench.core.paths import FIRMWARE_DIR
from bench.energy.protocol import Meter, MeterError, PowerSample
from bench.energy.spec import EnergySpec, SupplySettings, modelled_from

_READING = re.compile(r"NPC-SUPPLY (\d+(?:\.\d+)?) (\d+)\s*$")
POWER_FIGURES = FIRMWARE_DIR / "switch-arm64" / "power.json"  # the console's idle and loaded power, and source


def parse_supply(line: str) -> tuple[int, float] | None:
    """(device ns, mW) of one supply reading on the console; None for any other line."""
    m = _READING.search(line)
    return (round(float(m[1]) * 1e9), float(m[2])) if m else None


def console_modelled(timing: str) -> str:
    """What the virtual console's supply figures are modelled from, for the meter's name."""
    source = json.loads(POWER_FIGURES.read_text())["power_source"]
    return modelled_from(f"{'counted time' if timing == 'icount' else 'the guest CPU time'} and {source}")


class SupplyMeter(Meter[SupplySettings]):
    """The readings the console's guest prints, followed through its driver (`follow_console`)."""

    device_clock = True

    def __init__(self, device: str, spec: EnergySpec, driver: Any) -> None:
        super().__init__(device, spec)
        self.driver = driver

    @property
    def period_s(self) -> float:
        return self.settings.interval_ms / 1000

    @property
    def name(self) -> str:
        return f"lab supply meter on the console ({console_modelled(getattr(self.driver, 'timing', 'icount'))})"

    async def run(self) -> None:
        lines: asyncio.Queue[str] = asyncio.Queue()
        follower = asyncio.create_task(self.driver.follow_console(lines.put_nowait), name=f"supply-{self.device}")
        last = -1  # the first reading only starts the clock: what time it stands for is unknown
        try:
            while True:
                got = parse_supply(await lines.get())
                if got is None:
                    continue
                t_ns, power = got
                self.arrived(t_ns)
                if last >= 0 and t_ns > last:
                    self.samples.append(PowerSample(t_ns, t_ns - last, power))
                last = t_ns if last < 0 or t_ns > last else last
        finally:
            follower.cancel()
            await asyncio.gather(follower, return_exceptions=True)


def supply_meter(device: Any, driver: Any) -> SupplyMeter:
    """The supply meter of `device`, read through its running console `driver` (MeterError without one)."""
    if driver is None or not callable(getattr(driver, "follow_console", None)):
        raise MeterError(f"device {device.name!r}: meter 'supply' is a virtual console's, read through its driver",
                         hint="measure it in a replay or nightly of the console")  # fmt: skip
    return SupplyMeter(device.name, device.energy, driver)

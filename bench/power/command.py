"""Power through the lab's own commands: a relay board's script, a PDU's CLI, `pdudaemon`, `snmpset` ...

    power = { driver = "command", on = "relay 3 on", off = "relay 3 off", status = "relay 3 status" }

Each command runs with `sh -c` and $HILBENCH_DEVICE set to the device's name. `status` (optional) must
print `on` or `off`; without it the state is `unknown`. `cycle` (optional) replaces off + wait + on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from bench.core.fields import ranged
from bench.power.protocol import PowerDriver, PowerSettings, PowerState, run_tool


@dataclass(frozen=True, kw_only=True)
class CommandSettings(PowerSettings):
    """The shell commands: `on` and `off`, and optionally `status` and `cycle`, each given `timeout_s`."""

    on: str
    off: str
    status: str | None = None
    cycle: str | None = None
    timeout_s: float = ranged(30.0, 0.1, 3600.0)


class CommandPower(PowerDriver[CommandSettings]):
    """Shell commands that switch (and optionally read) the device's supply."""

    SETTINGS: ClassVar[type[PowerSettings]] = CommandSettings

    @property
    def where(self) -> str:
        return f"command {self.settings.on!r}"

    async def _run(self, which: str, command: str) -> str:
        """Run the `which` command (`command`, from the table) with the device's name in HILBENCH_DEVICE."""
        env = {**os.environ, "HILBENCH_DEVICE": self.device}
        return await run_tool(
            ["sh", "-c", command],
            what=f"device {self.device!r}: power {which} command",
            timeout_s=self.settings.timeout_s,
            env=env,
        )

    async def on(self) -> None:
        """Run the `on` command."""
        await self._run("on", self.settings.on)

    async def off(self) -> None:
        """Run the `off` command."""
        await self._run("off", self.settings.off)

    async def cycle(self, off_s: float | None = None) -> None:
        """The `cycle` command when given, else off, wait, on."""
        if self.settings.cycle is not None:
            await self._run("cycle", self.settings.cycle)
        else:
            await super().cycle(off_s)

    async def status(self) -> PowerState:
        """The `status` command's first word (`on`/`off`), or unknown without one."""
        if self.settings.status is None:
            return PowerState.UNKNOWN
        words = (await self._run("status", self.settings.status)).strip().lower().split()
        first = words[0] if words else ""
        return PowerState(first) if first in ("on", "off") else PowerState.UNKNOWN

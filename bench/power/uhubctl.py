"""Power through a USB hub port that switches VBUS per port, with uhubctl (https://github.com/mvp/uhubctl).

    power = { driver = "uhubctl", location = "1-1.4", port = 2 }

`uhubctl -l LOCATION -p PORT -a on|off` switches; the status line `Port 2: 0503 power ...` / `Port 2: 0000 off`
is read back. `uhubctl = "PATH"` names another binary (the virtual fleet's stand-in, or one under sudo).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench.core.fields import REQUIRED, matching, ranged
from bench.power.protocol import PowerDriver, PowerError, PowerSettings, PowerState, run_tool

_PORT_RE = re.compile(r"^\s*Port (\d+): ([0-9a-fA-F]{4})\s*(.*)$")


def parse_status(text: str, port: int) -> PowerState:
    """The last status line uhubctl printed for `port` (its output lists the hub before and after a change)."""
    state = PowerState.UNKNOWN
    for line in text.splitlines():
        match = _PORT_RE.match(line)
        if match and int(match[1]) == port:
            words = match[3].split()
            state = PowerState.OFF if "off" in words or "power" not in words else PowerState.ON
    return state


@dataclass(frozen=True, kw_only=True)
class UhubctlSettings(PowerSettings):
    """One port of a hub: its location (bus-port.port, as `uhubctl -l` takes it) and port number, and the
    uhubctl to run."""

    location: str = matching(REQUIRED, r"[0-9]{1,3}(-[0-9]{1,3}(\.[0-9]{1,3}){0,6})?", "is not a location (e.g. 1-1.4)")
    port: int = ranged(REQUIRED, 1, 255)  # a USB hub's port numbers
    uhubctl: str = "uhubctl"

    def programs(self) -> dict[str, str]:
        """The uhubctl to run (a path from the fleet file's folder, or a name on PATH)."""
        return {"uhubctl": self.uhubctl}


class UhubctlPower(PowerDriver[UhubctlSettings]):
    """One port of a per-port-power-switching USB hub."""

    SETTINGS: ClassVar[type[PowerSettings]] = UhubctlSettings

    @property
    def binary(self) -> str:
        """The uhubctl to run (a relative path resolves against the fleet file's folder)."""
        given = self.settings.uhubctl
        return str((self.spec.base_dir / given).resolve()) if "/" in given and not Path(given).is_absolute() else given

    @property
    def where(self) -> str:
        return f"uhubctl hub {self.settings.location} port {self.settings.port}"

    def _argv(self, *action: str) -> list[str]:
        return [self.binary, "-l", self.settings.location, "-p", str(self.settings.port), *action]

    async def _switch(self, action: str) -> None:
        out = await run_tool(self._argv("-a", action), what=f"device {self.device!r}: {self.where}")
        want = PowerState.ON if action == "on" else PowerState.OFF
        if parse_status(out, self.settings.port) not in (want, PowerState.UNKNOWN):
            raise PowerError(f"device {self.device!r}: {self.where} did not switch {action}", hint=out.strip())

    async def on(self) -> None:
        """`uhubctl -a on`."""
        await self._switch("on")

    async def off(self) -> None:
        """`uhubctl -a off`."""
        await self._switch("off")

    async def status(self) -> PowerState:
        """`uhubctl` without an action lists the port."""
        out = await run_tool(self._argv(), what=f"device {self.device!r}: {self.where}")
        return parse_status(out, self.settings.port)

"""Power through the labgrid place's own power resource (NetworkPowerPort, USBPowerPort, PDUDaemonPort, ...).

    power = { driver = "labgrid" }        # the device's `place`; or: power = { driver = "labgrid", place = "p" }

labgrid's power protocol is reached the way labgrid documents it, `labgrid-client -p PLACE power on|off|get`,
as this job's identity (LG_HOSTNAME/LG_USERNAME): the bench acquires the place first (every `hilbench`
command that touches a lab device does), so the client sees the place as its own.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench.power.protocol import PowerDriver, PowerError, PowerSettings, PowerSpec, PowerState, run_tool


@dataclass(frozen=True, kw_only=True)
class LabgridSettings(PowerSettings):
    """The place whose power resource it is, and the coordinator serving it (by default the device's `place` and
    the fleet's [lab] coordinator, filled in by the fleet loader)."""

    place: str | None = None
    coordinator: str | None = None


class LabgridPower(PowerDriver[LabgridSettings]):
    """The power resource of the device's labgrid place."""

    SETTINGS: ClassVar[type[PowerSettings]] = LabgridSettings

    def __init__(self, device: str, spec: PowerSpec) -> None:
        super().__init__(device, spec)
        if not self.settings.place or not self.settings.coordinator:
            raise PowerError(
                f"device {device!r}: power driver 'labgrid' needs a named place and the fleet's [lab] coordinator",
                hint="give the device `place` (and [lab] coordinator), or power = { driver = 'labgrid', place = ... }",
            )

    @property
    def where(self) -> str:
        return f"labgrid place {self.settings.place}"

    def _client(self) -> str:
        beside = Path(sys.executable).parent / "labgrid-client"  # the venv's, pinned with the bench
        return str(beside) if beside.exists() else (shutil.which("labgrid-client") or "labgrid-client")

    async def _power(self, action: str) -> str:
        from bench.core.identity import job_identity  # bench.lab sits above the fleet file, which names backends

        host, user = job_identity()
        env = {**os.environ, "LG_HOSTNAME": host, "LG_USERNAME": user}
        argv = [self._client(), "-x", str(self.settings.coordinator), "-p", str(self.settings.place)]
        return await run_tool([*argv, "power", action], what=f"device {self.device!r}: {self.where}", env=env)

    async def on(self) -> None:
        """`labgrid-client power on`."""
        await self._power("on")

    async def off(self) -> None:
        """`labgrid-client power off`."""
        await self._power("off")

    async def status(self) -> PowerState:
        """`labgrid-client power get` prints `... is on` / `... is off`."""
        words = (await self._power("get")).strip().lower().split()
        last = words[-1] if words else ""
        return PowerState(last) if last in ("on", "off") else PowerState.UNKNOWN

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
from pathlib import Path
from typing import ClassVar

from bench.power.protocol import PowerDriver, PowerError, PowerSpec, PowerState, run_tool


class LabgridPower(PowerDriver):
    """The power resource of the device's labgrid place."""

    FIELDS: ClassVar[dict[str, type]] = {"place": str, "coordinator": str}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, device: str, spec: PowerSpec) -> None:
        super().__init__(device, spec)
        if not spec.options.get("place") or not spec.options.get("coordinator"):
            raise PowerError(
                f"device {device!r}: power driver 'labgrid' needs a named place and the fleet's [lab] coordinator",
                hint="give the device `place` (and [lab] coordinator), or power = { driver = 'labgrid', place = ... }",
            )

    @property
    def where(self) -> str:
        return f"labgrid place {self.spec.options['place']}"

    def _client(self) -> str:
        beside = Path(sys.executable).parent / "labgrid-client"  # the venv's, pinned with the bench
        return str(beside) if beside.exists() else (shutil.which("labgrid-client") or "labgrid-client")

    async def _power(self, action: str) -> str:
        from bench.core.identity import job_identity  # bench.lab sits above the fleet file, which names backends

        host, user = job_identity()
        env = {**os.environ, "LG_HOSTNAME": host, "LG_USERNAME": user}
        argv = [self._client(), "-x", str(self.spec.options["coordinator"]), "-p", str(self.spec.options["place"])]
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

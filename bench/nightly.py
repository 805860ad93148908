"""The nightly HIL run: every stage of the bench, in order, on every device that still works.

A stage that fails on a device is recorded and the device is left out of later stages; the run goes on
with the rest. Everything measured is stored as it is measured.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fleet import Device, Fleet
from bench.probe import probe_link
from bench.virtual import virtual_fleet


@dataclass
class DeviceOutcome:
    """What one stage did on one device."""

    ok: bool
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class StageResult:
    """One stage over the whole fleet."""

    name: str
    seconds: float
    devices: dict[str, DeviceOutcome]

    @property
    def ok(self) -> bool:
        """True when the stage worked on every device it ran on."""
        return all(o.ok for o in self.devices.values())


@dataclass
class NightlyContext:
    """What the stages share: the fleet, the devices still in the run, and where output goes."""

    fleet: Fleet
    devices: list[Device]
    reports_dir: Path
    sessions_dir: Path
    baseline: str | None
    progress: Callable[[str], None]
    stages: list[StageResult] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # device -> why it left the run


Stage = Callable[[NightlyContext], Awaitable[dict[str, DeviceOutcome]]]


async def stage_check(ctx: NightlyContext) -> dict[str, DeviceOutcome]:
    """Probe every device through its link."""
    outcomes = {}
    for dev in ctx.devices:
        res = await probe_link(dev)
        outcomes[dev.name] = DeviceOutcome(res.reachable, res.detail)
    return outcomes


STAGES: list[tuple[str, Stage]] = [
    ("check", stage_check),
]


async def run_nightly(ctx: NightlyContext) -> NightlyContext:
    """Run every stage; a device that fails a stage is dropped from the later ones."""
    async with virtual_fleet(ctx.devices) as (resolved, _running):
        ctx.devices = resolved
        for name, stage in STAGES:
            if not ctx.devices:
                break
            ctx.progress(f"stage {name} on {len(ctx.devices)} device(s)")
            started = time.monotonic()
            outcomes = await stage(ctx)
            ctx.stages.append(StageResult(name, time.monotonic() - started, outcomes))
            for dev_name, outcome in outcomes.items():
                if not outcome.ok:
                    ctx.dropped[dev_name] = f"{name}: {outcome.detail}"
            ctx.devices = [d for d in ctx.devices if d.name not in ctx.dropped]
    return ctx

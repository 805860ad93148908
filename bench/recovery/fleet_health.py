"""`fleet health`: is each device answering? With `fix`, climb the recovery ladder for those that are not.
A device that answers is marked good again (later runs take it back); one the ladder cannot bring back
is marked bad with the reason."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.config.fleet import Device
from bench.core.errors import BenchError
from bench.devices import driver_for, has_driver
from bench.lab.acquire import reachable_devices
from bench.recovery.ladder import CHECK_TIMEOUT_S, RecoveryResult, answers, recover
from bench.store.health import BAD, GOOD
from bench.store.results import ResultStore


@dataclass
class HealthCheck:
    """One device's health check."""

    device: str
    before: str  # state recorded before the check
    answered: bool
    state: str  # state recorded after it
    detail: str = ""
    recovery: RecoveryResult | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"device": self.device, "before": self.before, "answered": self.answered, "state": self.state,
                "detail": self.detail, "recovery": self.recovery.to_json() if self.recovery else None}  # fmt: skip


async def check_one(
    device: Device, store: ResultStore, *, fix: bool, log_dir: Path | None = None, timeout_s: float = CHECK_TIMEOUT_S
) -> HealthCheck:
    """Check `device` (already reachable: virtual ones started, lab ones acquired); recover it with `fix`."""
    before = store.health.current(device.name)
    if not has_driver(device.kind):
        return HealthCheck(device.name, before.state, False, before.state, f"no driver for kind {device.kind!r}")
    driver = driver_for(device, log_dir=log_dir)
    try:
        await answers(driver, timeout_s)
    except (BenchError, OSError, TimeoutError) as exc:
        why = f"health check: no answer: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
        hint = getattr(exc, "hint", None)
        if hint:
            why += f" (hint: {hint.replace('NAME', device.name)})"
        if not fix:
            return HealthCheck(device.name, before.state, False, before.state, why)
        result = await recover(device, why, driver=driver, store=store, log_dir=log_dir, check_timeout_s=timeout_s)
        if not result.recovered:
            return HealthCheck(device.name, before.state, False, BAD, result.reason, result)
        detail = f"recovered by {result.step} in {result.seconds:.1f} s"
        store.health.set_state(device.name, GOOD, "")
        return HealthCheck(device.name, before.state, True, GOOD, detail, result)
    store.health.set_state(device.name, GOOD, "")
    return HealthCheck(device.name, before.state, True, GOOD, "answered")


async def check_fleet(
    devices: list[Device], store: ResultStore, *, fix: bool, log_dir: Path | None = None
) -> list[HealthCheck]:
    """Health-check `devices` at once (virtual ones started, lab places acquired for the check)."""
    async with reachable_devices(devices) as (resolved, _running):
        return list(await asyncio.gather(*(check_one(d, store, fix=fix, log_dir=log_dir) for d in resolved)))

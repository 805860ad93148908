"""Opening agent sessions for a replay through each device's driver (same path for real and virtual)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.agent.endpoint import AgentEndpoint, OpenAgent
from bench.agent.session import AgentSession
from bench.config.fleet import Device
from bench.config.kinds import load
from bench.core.errors import BenchError, ConfigError
from bench.devices import has_driver
from bench.devices.base import Driver
from bench.devices.held import HeldDrivers, driver_of
from bench.recovery.surviving import SurvivingSession

if TYPE_CHECKING:  # the recovery ladder's store (health records); the replay itself writes through a RunSink
    from bench.store.results import ResultStore


async def deploy(device: Device, log_dir: Path | None = None, drivers: HeldDrivers | None = None) -> None:
    """Flash/deploy `device` (its driver skips what is up to date); BenchError naming the failed step. The agent
    is stopped afterwards, also a held one (`drivers`), so the next open starts it on what was deployed."""
    driver = await driver_of(device, drivers, log_dir)
    try:
        steps = await driver.flash()
    finally:
        await driver.close_agent()
    failed = next((s for s in steps if not s.ok), None)
    if failed is not None:
        raise BenchError(f"device {device.name}: deploy step {failed.step} failed: {failed.detail}")


def driver_opener(
    log_dir: Path | None = None,
    deploy_first: bool = False,
    store: ResultStore | None = None,
    run_id: int | None = None,
    drivers: HeldDrivers | None = None,
) -> OpenAgent:
    """An OpenAgent that uses the device's driver: optionally deploy (agent and model), then
    `open_agent()` and an AgentSession on the transport. With a results `store`, the session is a
    SurvivingSession: a device that stops answering is recovered by the ladder (recorded with `run_id`).
    With `drivers`, the device's held driver is used: a fresh agent is started, and it stays up when the
    endpoint closes, for the stages after the replay."""

    async def open_agent(device: Device) -> AgentEndpoint:
        if not has_driver(device.kind):
            raise ConfigError(f"device {device.name}: no driver for kind {device.kind!r} yet")
        if deploy_first:
            await deploy(device, log_dir, drivers)
        driver = await driver_of(device, drivers, log_dir, fresh=True)
        if store is not None:
            return await _recovering(device, driver, store, run_id, log_dir)
        try:
            transport = await driver.open_agent()
            log = log_dir / f"{device.name}.agent.log" if log_dir else None
            session = await AgentSession.open(
                transport, device=device.name, log_path=log, timeout=driver.reply_timeout_s
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await driver.close_agent()
            raise

        async def close() -> None:
            await session.close()
            await driver.release_agent()

        return AgentEndpoint(session, close, driver)

    return open_agent


async def _recovering(
    device: Device, driver: Driver, store: ResultStore, run_id: int | None, log_dir: Path | None
) -> AgentEndpoint:
    log = log_dir / f"{device.name}.agent.log" if log_dir else None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    session = await SurvivingSession.open(
        device, driver, store=store, run_id=run_id, log_dir=log_dir, stall_s=device.settings.stall_s, log_path=log
    )

    async def close() -> None:
        try:
            if run_id is not None and session.recoveries:
                store.runs.update_device(
                    run_id, device.name, recoveries=[r.to_json() for r in session.recoveries],
                    dropped_inputs=session.dropped_inputs,
                )  # fmt: skip
        finally:
            await session.close()
            await driver.release_agent()

    return AgentEndpoint(session, close, driver)


def fleet_opener(
    store: ResultStore,
    run_id: int,
    log_dir: Path | None = None,
    deploy_first: bool = False,
    drivers: HeldDrivers | None = None,
) -> OpenAgent:
    """The opener `hilbench replay` and the nightly stage use: a kind with its own opener in the registry
    (Linux boards: board telemetry and bench-side faults stored with run `run_id`) through that, every
    other kind through `driver_opener`. With `drivers` (the nightly's), each run starts fresh agents, which stay
    up after it for the stages that follow."""
    generic = driver_opener(log_dir, deploy_first, store, run_id, drivers)
    openers: dict[str, Any] = {}  # one opener per opener class, shared by the devices that use it

    async def open_agent(device: Device) -> AgentEndpoint:
        ref = device.kind_info.opener
        if ref is None:
            return await generic(device)
        if ref not in openers:
            openers[ref] = load(ref)(store, run_id, held=drivers)
        if deploy_first:
            await deploy(device, log_dir, drivers)
        return await openers[ref].open(device)

    return open_agent

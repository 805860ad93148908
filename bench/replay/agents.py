"""Opening agent sessions for a replay through each device's driver (same path for real and virtual)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from bench.agent.session import AgentSession
from bench.devices import driver_for, has_driver
from bench.errors import BenchError, ConfigError
from bench.fleet import Device
from bench.replay.run import AgentEndpoint


def driver_opener(log_dir: Path | None = None, deploy: bool = False):
    """An OpenAgent that uses the device's driver: optionally flash (deploy agent and model, skipped when
    up to date), then `open_agent()` and an AgentSession on the transport."""

    async def open_agent(device: Device) -> AgentEndpoint:
        if not has_driver(device.kind):
            raise ConfigError(f"device {device.name}: no driver for kind {device.kind!r} yet")
        driver = driver_for(device, log_dir=log_dir)
        try:
            if deploy:
                steps = await driver.flash()
                failed = next((s for s in steps if not s.ok), None)
                if failed is not None:
                    raise BenchError(f"device {device.name}: deploy step {failed.step} failed: {failed.detail}")
            transport = await driver.open_agent()
            log = log_dir / f"{device.name}.agent.log" if log_dir else None
            session = await AgentSession.open(transport, device=device.name, log_path=log)
        except BaseException:
            with contextlib.suppress(Exception):
                await driver.close_agent()
            raise

        async def close() -> None:
            await session.close()
            await driver.close_agent()

        return AgentEndpoint(session, close)

    return open_agent

"""The recovering session wrappers' shared part: stop waits for a recovery under way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bench.agent.relay import RelayedSession
from bench.core.errors import DeviceUnreachable
from bench.recovery.ladder import RecoveryResult


class Inner:
    """Just enough of an AgentSession."""

    def __init__(self) -> None:
        self.sent_ns: dict[int, int] = {}
        self.closed = False
        self.stopped = 0

    async def stop(self, timeout: float | None = None) -> dict[str, Any]:
        self.stopped += 1
        return {"t": "ack"}


class Relay(RelayedSession):
    @property
    def device(self) -> str:
        return "pi5-1"


async def stop_during_recovery(recovered: bool) -> tuple[Relay, list[str]]:
    relay = Relay(Inner())  # type: ignore[arg-type]
    order: list[str] = []

    async def ladder() -> None:
        async with relay._recovery():
            await asyncio.sleep(0.2)
            result = RecoveryResult("pi5-1", "frame loop stalled")
            result.recovered = recovered
            relay.recoveries.append(result)
            order.append("ladder done")

    task = asyncio.ensure_future(ladder())
    await asyncio.sleep(0.05)
    try:
        await relay.stop()
        order.append("stopped")
    finally:
        await task
    return relay, order


def test_stop_waits_for_the_ladder_then_stops_the_new_session() -> None:
    relay, order = asyncio.run(stop_during_recovery(True))
    assert order == ["ladder done", "stopped"] and relay.inner.stopped == 1


def test_stop_after_a_failed_ladder_names_its_reason() -> None:
    with pytest.raises(DeviceUnreachable, match="no step of the recovery ladder brought it back"):
        asyncio.run(stop_during_recovery(False))

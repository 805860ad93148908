"""The surviving session's `stop` waits for a recovery under way, then stops the new session or names why the
ladder failed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from bench.core.errors import DeviceUnreachable
from bench.recovery.ladder import RecoveryResult
from bench.recovery.surviving import SurvivingSession


class Inner:
    """Just enough of an AgentSession."""

    def __init__(self) -> None:
        self.sent_ns: dict[int, int] = {}
        self.closed = False
        self.stopped = 0

    async def stop(self, timeout: float | None = None) -> dict[str, Any]:
        self.stopped += 1
        return {"t": "ack"}


async def stop_during_recovery(recovered: bool) -> tuple[SurvivingSession, list[str]]:
    device = SimpleNamespace(name="pi5-1", settings=SimpleNamespace(stall_s=5.0))
    session = SurvivingSession(device, driver=None, session=Inner())  # type: ignore[arg-type]
    order: list[str] = []

    async def ladder() -> None:
        async with session._recovery():
            await asyncio.sleep(0.2)
            result = RecoveryResult("pi5-1", "frame loop stalled")
            result.recovered = recovered
            session.recoveries.append(result)
            order.append("ladder done")

    task = asyncio.ensure_future(ladder())
    await asyncio.sleep(0.05)
    try:
        await session.stop()
        order.append("stopped")
    finally:
        await task
    return session, order


def test_stop_waits_for_the_ladder_then_stops_the_new_session() -> None:
    session, order = asyncio.run(stop_during_recovery(True))
    assert order == ["ladder done", "stopped"] and session.inner.stopped == 1  # type: ignore[attr-defined]


def test_stop_after_a_failed_ladder_names_its_reason() -> None:
    with pytest.raises(DeviceUnreachable, match="no step of the recovery ladder brought it back"):
        asyncio.run(stop_during_recovery(False))

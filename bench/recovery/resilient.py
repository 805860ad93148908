"""An agent session that outlives its agent process: when the link ends mid-run, the bench finds out why
(the agent died, or only the SSH connection), records it, restarts the agent if needed, opens a new
session, restarts the frame loop with the same settings and carries on. Frame records keep counting
(indices continue across restarts) and everything received before the fault is kept.

When the device itself stops answering (no frame record for the device's `stall_s` and no answer to a
ping, or the agent cannot be restarted over SSH), the recovery ladder (bench/health) takes over: power
cycle, redeploy.

It stands in for an `AgentSession` wherever a run holds one (e.g. `ReplayRun`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bench.agent.frame import Frame
from bench.agent.relay import RelayedSession, start_fresh, still_answers
from bench.agent.session import AgentSession
from bench.core.errors import DeviceUnreachable, ProductFailure
from bench.devices.linux import AgentFault, LinuxDriver

if TYPE_CHECKING:
    from bench.store.results import ResultStore

# Called with each agent session the run gets: the first one, and the new one after every recovery.
SessionHook = Callable[[AgentSession], None]


class AgentGaveUp(ProductFailure):
    """The agent died more often than a run allows."""


class ResilientSession(RelayedSession):
    """An AgentSession look-alike over a LinuxDriver that restarts the agent when it dies mid-run."""

    def __init__(
        self,
        driver: LinuxDriver,
        session: AgentSession,
        *,
        max_restarts: int = 3,
        on_session: SessionHook | None = None,
        store: ResultStore | None = None,
        run_id: int | None = None,
    ) -> None:
        super().__init__(session)
        self.store = store  # where the recovery ladder records what it did
        self.run_id = run_id
        self.driver = driver
        self.max_restarts = max_restarts
        self.on_session = on_session
        self.restarts = 0
        self._received = 0  # frame records so far, from every agent process

    @classmethod
    async def open(cls, driver: LinuxDriver, **kwargs: Any) -> ResilientSession:
        """Start (if needed) and open the driver's agent."""
        resilient = cls(driver, await driver.open_session(), **kwargs)
        if resilient.on_session is not None:
            resilient.on_session(resilient.inner)
        return resilient

    @property
    def device(self) -> str:
        """The device name."""
        return self.driver.device.name

    # -- frames ------------------------------------------------------------------------------------

    async def frames(self, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Frame records until the loop is stopped; across agent restarts, with indices continuing."""
        while True:
            stalled = ""
            try:
                async for rec in self.inner.frames(timeout or self.driver.device.settings.stall_s):
                    self._received += 1
                    yield self._numbered(rec)
            except DeviceUnreachable as exc:
                if not self._stopping and await still_answers(self.inner, self.driver.device.settings.stall_s):
                    continue  # a slow frame loop, not a device that stopped answering
                stalled = str(exc).splitlines()[0]
            if self.inner.last_stopped is not None or self._stopping or self._loop_start is None:
                return
            if self._loop_start.frames and self._received >= self._loop_start.frames:
                return  # every frame of a bounded run arrived; only the `stopped` was lost
            async with self._recovery():
                if stalled:
                    await self._climb(f"frame loop stalled: {stalled}")
                else:
                    await self._recover()

    async def _recover(self) -> None:
        """The link ended mid-run: restart the agent if it died, open a new session, restart the loop; when
        the device does not let the bench do that, climb the recovery ladder."""
        await self._retire()
        try:
            if await self.driver.agent_survived():
                self.driver.faults.append(AgentFault(time.monotonic_ns(), "agent-link-lost", "the agent kept running"))
            else:
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    raise AgentGaveUp(f"device {self.device!r}: the agent died {self.restarts} times; giving up")
                await self.driver.restart_agent(
                    f"agent exited during the run after {self._next_index} frame(s); "
                    f"{self.dropped_inputs} input(s) dropped so far"
                )
            session = await self.driver.open_session()
        except DeviceUnreachable as exc:
            await self._climb(f"transport dead: {str(exc).splitlines()[0]}")
            return
        await self._resume(session)

    async def _climb(self, why: str) -> None:
        """The device stopped answering: the recovery ladder, then carry on (DeviceUnreachable if it fails)."""
        from bench.recovery.ladder import recover  # the ladder sits above the drivers it climbs with

        await self._retire()
        result = await recover(
            self.driver.device, f"{why} after {self._next_index} frame(s)", driver=self.driver, store=self.store,
            run_id=self.run_id, keep_open=True,
        )  # fmt: skip
        self.recoveries.append(result)
        if not result.recovered or result.session is None:
            raise DeviceUnreachable(f"device {self.device!r}: {result.reason}")
        await self._resume(result.session)

    async def _resume(self, session: AgentSession) -> None:
        """Continue the run on `session`: its clock synced, the frame loop restarted with what is still owed."""
        await self._adopt(session)
        if self.on_session is not None:
            self.on_session(session)
        loop = self._loop_start
        assert loop is not None
        if loop.frames:  # a run of so many frames: the new loop owes what has not arrived yet
            loop = replace(loop, frames=loop.frames - self._received)
        # the new agent lost the inputs held for the old loop: it takes the rest as they come (no hold_count)
        await start_fresh(session, replace(loop, hold_count=None))

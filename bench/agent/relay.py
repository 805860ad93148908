"""The part every recovering session wrapper shares: an AgentSession look-alike that forwards to the agent
session of the moment (`inner`), which the wrapper replaces when it brings the agent back. Frame indices keep
counting across sessions, faults of the closed sessions are kept, and inputs sent while no session can take
them are dropped and counted. How a wrapper recovers is its own (bench.recovery.resilient: restart a Linux
agent; bench.recovery.session: the recovery ladder for any driver)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from bench.agent.clock import ClockSync
from bench.agent.frame import Frame
from bench.agent.session import AgentError, AgentSession, LoopStart
from bench.core.errors import BenchError, DeviceUnreachable

RECOVERY_CLOCK_PINGS = 8  # clock exchanges with each session after a recovery


class Recovery(Protocol):
    """What the relay reads of one recovery (bench.recovery.ladder.RecoveryResult is one)."""

    @property
    def recovered(self) -> bool:
        """Whether the device answered again."""

    @property
    def reason(self) -> str:
        """Why it did not recover."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, for the run's record."""


class RelayedSession:
    """Forwards the session protocol to `inner`; subclasses swap `inner` with `_adopt` when they recover."""

    def __init__(self, session: AgentSession) -> None:
        self.inner = session
        self.sent_ns: dict[int, int] = session.sent_ns  # shared by every inner session: input send times
        self.dropped_inputs = 0
        self._old_faults: list[dict[str, Any]] = []
        self._old_refusals: list[dict[str, Any]] = []
        self._loop_start: LoopStart | None = None
        self._stopping = False
        self._recovering = False
        self._idle = asyncio.Event()  # set while no recovery runs
        self._idle.set()
        self.recoveries: list[Recovery] = []  # what the recovery ladder did, in order
        self._index_offset = 0
        self._next_index = 0

    # -- what a run reads --------------------------------------------------------------------------

    @property
    def info(self) -> dict[str, Any]:
        """The current agent's hello."""
        return self.inner.info

    @property
    def clock(self) -> ClockSync:
        """The run's clock mapping (the current session's)."""
        return self.inner.clock

    @property
    def faults(self) -> list[dict[str, Any]]:
        """`fault` messages from every agent session of the run."""
        return self._old_faults + self.inner.faults

    @property
    def refusals(self) -> list[dict[str, Any]]:
        """`error` replies to lines sent without an id (inputs), from every agent session of the run."""
        return self._old_refusals + self.inner.refusals

    # -- requests ----------------------------------------------------------------------------------

    async def sync_clock(self, n: int = 16, interval: float = 0.0) -> ClockSync:
        """Clock exchanges with the current agent; the run's mapping (see `clock`)."""
        await self.inner.sync_clock(n, interval)
        return self.clock

    async def start(self, loop: LoopStart) -> dict[str, Any]:
        """Start the frame loop (remembered, to restart it after a recovery)."""
        self._loop_start = loop
        self._stopping = False
        return await self.inner.start(loop)

    @property
    def device(self) -> str:
        """The device name."""
        raise NotImplementedError

    async def stop(self, timeout: float | None = None) -> dict[str, Any]:
        """Stop the frame loop, after a recovery under way has finished (a replay's inputs can end while the
        ladder is still bringing the device back); DeviceUnreachable with the ladder's reason if it failed."""
        await self._idle.wait()
        self._stopping = True
        if self.recoveries and not self.recoveries[-1].recovered:
            raise DeviceUnreachable(f"device {self.device!r}: {self.recoveries[-1].reason}")
        return await self.inner.stop(timeout)

    async def hold(self) -> dict[str, Any]:
        """Have the current agent hold the inputs sent from now on for the next held loop (lost if it is
        recovered before that loop ends)."""
        return await self.inner.hold()

    async def stats(self) -> dict[str, Any]:
        """The current agent's stats."""
        return await self.inner.stats()

    async def load(
        self, path: str, manifest: dict[str, Any], timeout: float = 60.0, *, cold: bool = False
    ) -> dict[str, Any]:
        """Have the current agent load a model file on the device (`cold`: a cold start)."""
        return await self.inner.load(path, manifest, timeout, cold=cold)

    async def send_raw(self, data: bytes) -> int:
        """Send bytes; while the agent is being recovered the input is dropped (and counted), not an error."""
        if self._recovering or self.inner.closed:
            self.dropped_inputs += 1
            return time.monotonic_ns()
        try:
            return await self.inner.send_raw(data)
        except DeviceUnreachable:
            self.dropped_inputs += 1
            return time.monotonic_ns()

    async def close(self) -> None:
        """Close the current session."""
        await self.inner.close()

    # -- for the subclasses --------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _recovery(self) -> AsyncIterator[None]:
        """While the agent is brought back: inputs are dropped and counted, and `stop` waits."""
        self._recovering = True
        self._idle.clear()
        try:
            yield
        finally:
            self._recovering = False
            self._idle.set()

    def _numbered(self, rec: Frame) -> Frame:
        """`rec` with its index continuing those of the sessions before."""
        rec = dataclasses.replace(rec, i=rec.i + self._index_offset)
        self._next_index = rec.i + 1
        return rec

    async def _retire(self) -> None:
        """Close the current session, keeping its faults."""
        await self.inner.close()
        self._old_faults += self.inner.faults
        self._old_refusals += self.inner.refusals

    async def _adopt(self, session: AgentSession) -> None:
        """Carry on with `session`: it shares the input send times, its clock is synced, indices continue."""
        session.sent_ns = self.sent_ns
        self.inner = session
        await session.sync_clock(RECOVERY_CLOCK_PINGS)
        self._index_offset = self._next_index


async def still_answers(session: AgentSession, timeout_s: float) -> bool:
    """Does the agent answer a ping within `timeout_s` (at least 2 s)? Tells a slow frame loop from a hang."""
    if session.closed:
        return False
    try:
        await session.request("ping", timeout=max(timeout_s, 2.0), b0=time.monotonic_ns())
    except (BenchError, OSError, TimeoutError):
        return False
    return True


async def start_fresh(session: AgentSession, loop: LoopStart, drain_timeout_s: float = 5.0) -> None:
    """Start the frame loop; if a loop is still running (left by a session whose link dropped), stop it,
    let its last records and its `stopped` go by, then start."""
    try:
        await session.start(loop)
    except AgentError as exc:
        if exc.code != "busy":
            raise
        await session.stop()
        async for _stale in session.frames(timeout=drain_timeout_s):
            pass
        await session.start(loop)

"""An agent session that survives a fault: it stands in for an `AgentSession` wherever a run holds one
(bench.agent.endpoint.AgentLike, e.g. in `ReplayRun`), forwarding to the agent session of the moment and
replacing it when the device is brought back.

- The link ends mid-run on a board whose agent the bench starts over SSH (a `LinuxDriver`): the bench finds out
  why (the agent died, or only the SSH connection), records it, restarts the agent if needed (at most
  `max_restarts` times, then AgentGaveUp) and opens a new session.
- No frame record comes for `stall_s` and the agent does not answer a ping either (the board hung), or the link
  ends on any other board: the recovery ladder (bench.recovery.ladder: soft reset, hard reset, power cycle)
  brings the device back, at most `max_recoveries` times. Device times of later records are put on the first
  session's clock (a reset restarts the device's clock), so one mapping serves the whole run.

Either way the frame loop restarts with the same settings and what it still owes, frame indices keep counting,
every record and fault received before is kept, and inputs sent while the device is away are dropped and
counted. A device the ladder cannot bring back ends the run for that device with DeviceUnreachable (and is
marked bad by the ladder)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bench.agent.clock import ClockSync
from bench.agent.frame import Frame
from bench.agent.session import AgentError, AgentSession, LoopStart
from bench.config.fleet import Device
from bench.core.errors import BenchError, DeviceUnreachable, ProductFailure
from bench.devices.base import Driver
from bench.devices.linux import AgentFault, LinuxDriver
from bench.recovery.ladder import RecoveryResult, recover
from bench.store.results import ResultStore

RECOVERY_CLOCK_PINGS = 8  # clock exchanges with each session after a recovery
_DEVICE_TIMES = ("due", "t0", "t1")
# Called with each agent session the run gets: the first one, and the new one after every recovery.
SessionHook = Callable[[AgentSession], None]


class AgentGaveUp(ProductFailure):
    """The agent died more often than a run allows."""


class SurvivingSession:
    """An AgentSession look-alike over any driver that brings the agent or the device back when it fails."""

    def __init__(
        self,
        device: Device,
        driver: Driver,
        session: AgentSession,
        *,
        store: ResultStore | None = None,
        run_id: int | None = None,
        stall_s: float | None = None,
        max_restarts: int = 3,
        max_recoveries: int = 3,
        log_dir: Path | None = None,
        on_session: SessionHook | None = None,
    ) -> None:
        self.device_info = device
        self.driver = driver
        self.inner = session
        self.store = store  # where the recovery ladder records what it did
        self.run_id = run_id
        self.stall_s = stall_s if stall_s is not None else device.settings.stall_s
        self.max_restarts = max_restarts
        self.max_recoveries = max_recoveries
        self.log_dir = log_dir
        self.on_session = on_session
        self.sent_ns: dict[int, int] = session.sent_ns  # shared by every inner session: input send times
        self.recoveries: list[RecoveryResult] = []  # what the recovery ladder did, in order
        self.restarts = 0  # agent restarts (a LinuxDriver's)
        self.dropped_inputs = 0
        self._old_faults: list[dict[str, Any]] = []
        self._old_refusals: list[dict[str, Any]] = []
        self._loop_start: LoopStart | None = None
        self._stopping = False
        self._recovering = False
        self._idle = asyncio.Event()  # set while no recovery runs
        self._idle.set()
        self._index_offset = 0
        self._next_index = 0
        self._received = 0  # frame records so far, from every agent session
        self._domain: ClockSync | None = None  # the first session's clock, once a recovery reset the device's
        self._retired: AgentSession | None = None  # the session last closed for a recovery

    @classmethod
    async def open(
        cls, device: Device, driver: Driver, *, log_path: Path | None = None, **kwargs: Any
    ) -> SurvivingSession:
        """Open the device's agent (a LinuxDriver starts it if needed); on another board, one that gives no hello
        is recovered first (DeviceUnreachable if that fails)."""
        recovery: RecoveryResult | None = None
        if isinstance(driver, LinuxDriver):
            session = await driver.open_session()
        else:
            try:
                transport = await driver.open_agent()
                session = await AgentSession.open(
                    transport, device=device.name, log_path=log_path, timeout=driver.reply_timeout_s
                )
            except (BenchError, OSError, TimeoutError) as exc:
                with contextlib.suppress(Exception):
                    await driver.close_agent()
                recovery = await recover(
                    device, f"no hello: {_first_line(exc)}", driver=driver, store=kwargs.get("store"),
                    run_id=kwargs.get("run_id"), keep_open=True,
                )  # fmt: skip
                if not recovery.recovered or recovery.session is None:
                    raise DeviceUnreachable(f"device {device.name!r}: {recovery.reason}") from None
                session = recovery.session
        opened = cls(device, driver, session, **kwargs)
        if recovery is not None:
            opened.recoveries.append(recovery)
        if opened.on_session is not None:
            opened.on_session(session)
        return opened

    # -- what a run reads --------------------------------------------------------------------------

    @property
    def device(self) -> str:
        """The device name."""
        return self.device_info.name

    @property
    def info(self) -> dict[str, Any]:
        """The current agent's hello."""
        return self.inner.info

    @property
    def clock(self) -> ClockSync:
        """The run's clock mapping: the first session's once a recovery reset the device's clock."""
        return self._domain or self.inner.clock

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

    # -- frames and recovery -----------------------------------------------------------------------

    async def frames(self, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Frame records until the loop is stopped; across restarts and recoveries, indices continuing."""
        while True:
            stalled = ""
            try:
                async for rec in self.inner.frames(timeout or self.stall_s):
                    self._received += 1
                    yield self._numbered(self._to_run_clock(rec))
            except DeviceUnreachable as exc:
                if not self._stopping and await still_answers(self.inner, self.stall_s):
                    continue  # a slow frame loop (an emulator under load), not a device that stopped answering
                stalled = f"frame loop stalled: {_first_line(exc)}"
            if self.inner.last_stopped is not None or self._stopping or self._loop_start is None:
                return
            if self._loop_start.frames and self._received >= self._loop_start.frames:
                return  # every frame of a bounded run arrived; only the `stopped` was lost
            async with self._recovery():
                if stalled or not isinstance(self.driver, LinuxDriver):
                    await self._climb(stalled or "transport dead: the link ended before the frame loop was stopped")
                else:
                    await self._restart(self.driver)

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

    async def _restart(self, driver: LinuxDriver) -> None:
        """The link to a Linux board's agent ended: restart the agent if it died, open a new session; when the
        device does not let the bench do that, climb the recovery ladder."""
        await self._retire()
        try:
            if await driver.agent_survived():
                driver.faults.append(AgentFault(time.monotonic_ns(), "agent-link-lost", "the agent kept running"))
            else:
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    raise AgentGaveUp(f"device {self.device!r}: the agent died {self.restarts} times; giving up")
                await driver.restart_agent(
                    f"agent exited during the run after {self._next_index} frame(s); "
                    f"{self.dropped_inputs} input(s) dropped so far"
                )
            session = await driver.open_session()
        except DeviceUnreachable as exc:
            await self._climb(f"transport dead: {_first_line(exc)}")
            return
        await self._resume(session)

    async def _climb(self, why: str) -> None:
        """The device stopped answering: the recovery ladder, then carry on (DeviceUnreachable if it fails)."""
        if len(self.recoveries) >= self.max_recoveries:
            raise DeviceUnreachable(f"device {self.device!r}: {why}; already recovered {len(self.recoveries)} times")
        run_clock = self.clock
        await self._retire()
        result = await recover(
            self.device_info, f"{why} after {self._next_index} frame(s)", driver=self.driver, store=self.store,
            run_id=self.run_id, keep_open=True, log_dir=self.log_dir,
        )  # fmt: skip
        self.recoveries.append(result)
        if not result.recovered or result.session is None:
            raise DeviceUnreachable(f"device {self.device!r}: {result.reason}")
        self._domain = run_clock
        await self._resume(result.session)

    async def _retire(self) -> None:
        """Close the current session (once: the ladder may follow a restart that failed), keeping its faults and
        refusals."""
        if self._retired is self.inner:
            return
        await self.inner.close()
        self._retired = self.inner
        self._old_faults += self.inner.faults
        self._old_refusals += self.inner.refusals

    async def _resume(self, session: AgentSession) -> None:
        """Continue the run on `session`: it shares the input send times, its clock is synced, indices continue,
        and the frame loop restarts with what is still owed."""
        session.sent_ns = self.sent_ns
        self.inner = session
        await session.sync_clock(RECOVERY_CLOCK_PINGS)
        self._index_offset = self._next_index
        if self.on_session is not None:
            self.on_session(session)
        loop = self._loop_start
        assert loop is not None
        if loop.frames:  # a run of so many frames: the new loop owes what has not arrived yet
            loop = dataclasses.replace(loop, frames=loop.frames - self._received)
        # the new agent lost the inputs held for the old loop: it takes the rest as they come (no hold_count)
        await start_fresh(session, dataclasses.replace(loop, hold_count=None))

    def _numbered(self, rec: Frame) -> Frame:
        """`rec` with its index continuing those of the sessions before."""
        rec = dataclasses.replace(rec, i=rec.i + self._index_offset)
        self._next_index = rec.i + 1
        return rec

    def _to_run_clock(self, rec: Frame) -> Frame:
        """The record with its device times on the run's clock (the first session's, once a recovery reset it)."""
        if self._domain is None:
            return rec
        times = {name: getattr(rec, name) for name in _DEVICE_TIMES}
        mapped = {
            n: self._domain.to_device_us(self.inner.clock.to_bench_ns(int(v)))
            for n, v in times.items()
            if v is not None
        }
        return dataclasses.replace(rec, **mapped)


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""An agent session that climbs the recovery ladder when its device stops answering mid-run.

It stands in for an `AgentSession` wherever a run holds one (e.g. `ReplayRun`). When no frame record
comes for `stall_s` and the agent does not answer a ping either (the board hung), or the link ends
before the loop was stopped (transport dead), it runs `recover()`, opens the agent again, restarts the
frame loop with the same settings and carries on: frame indices keep counting, every record received
before the hang is kept, and inputs sent while the device is away are dropped and counted. Device times
of records after a reset are put on the first session's clock (a reset restarts the device's clock), so
one mapping serves the whole run. A device the ladder cannot bring back ends the run for that device
with DeviceUnreachable (and is marked bad by the ladder).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from bench.agent.clock import ClockSync
from bench.agent.frame import Frame
from bench.agent.relay import RelayedSession, start_fresh, still_answers
from bench.agent.session import AgentSession
from bench.config.fleet import Device
from bench.core.errors import BenchError, DeviceUnreachable
from bench.devices.base import Driver
from bench.recovery.ladder import RecoveryResult, recover
from bench.store.results import ResultStore

DEFAULT_STALL_S = 5.0
_DEVICE_TIMES = ("due", "t0", "t1")


class RecoveringSession(RelayedSession):
    """An AgentSession look-alike over any driver that recovers the device when it stops answering."""

    def __init__(
        self,
        device: Device,
        driver: Driver,
        session: AgentSession,
        *,
        store: ResultStore | None = None,
        run_id: int | None = None,
        stall_s: float = DEFAULT_STALL_S,
        max_recoveries: int = 3,
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(session)
        self.device_info = device
        self.driver = driver
        self.store = store
        self.run_id = run_id
        self.stall_s = stall_s
        self.max_recoveries = max_recoveries
        self.log_dir = log_dir
        self._domain: ClockSync | None = None  # the first session's clock, once a recovery changed the device's

    @classmethod
    async def open(
        cls, device: Device, driver: Driver, *, store: ResultStore | None = None, run_id: int | None = None,
        log_dir: Path | None = None, stall_s: float = DEFAULT_STALL_S, log_path: Path | None = None,
    ) -> RecoveringSession:  # fmt: skip
        """Open the device's agent; when it gives no hello, recover it first (DeviceUnreachable if that fails)."""
        recovery: RecoveryResult | None = None
        try:
            transport = await driver.open_agent()
            session = await AgentSession.open(
                transport, device=device.name, log_path=log_path, timeout=driver.reply_timeout_s
            )
        except (BenchError, OSError, TimeoutError) as exc:
            with contextlib.suppress(Exception):
                await driver.close_agent()
            recovery = await recover(
                device, f"no hello: {_first_line(exc)}", driver=driver, store=store, run_id=run_id, keep_open=True
            )
            if not recovery.recovered or recovery.session is None:
                raise DeviceUnreachable(f"device {device.name!r}: {recovery.reason}") from None
            session = recovery.session
        opened = cls(device, driver, session, store=store, run_id=run_id, stall_s=stall_s, log_dir=log_dir)
        if recovery is not None:
            opened.recoveries.append(recovery)
        return opened

    # -- what a run reads --------------------------------------------------------------------------

    @property
    def clock(self) -> ClockSync:
        """The run's clock mapping: the first session's once a recovery reset the device's clock."""
        return self._domain or self.inner.clock

    @property
    def device(self) -> str:
        """The device name."""
        return self.device_info.name

    # -- frames ------------------------------------------------------------------------------------

    async def frames(self, timeout: float | None = None) -> AsyncIterator[Frame]:
        """Frame records until the loop is stopped; across recoveries, indices continuing."""
        while True:
            try:
                async for rec in self.inner.frames(timeout or self.stall_s):
                    yield self._numbered(self._to_run_clock(rec))
                why = "transport dead: the link ended before the frame loop was stopped"
            except DeviceUnreachable as exc:
                if not self._stopping and await still_answers(self.inner, self.stall_s):
                    continue  # a slow frame loop (an emulator under load), not a device that stopped answering
                why = f"frame loop stalled: {_first_line(exc)}"
            if self.inner.last_stopped is not None or self._stopping or self._loop_start is None:
                return
            await self._recover(why)

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

    async def _recover(self, why: str) -> None:
        """The device stopped answering mid-run: climb the ladder, reopen, restart the frame loop."""
        if len(self.recoveries) >= self.max_recoveries:
            raise DeviceUnreachable(f"device {self.device!r}: {why}; already recovered {len(self.recoveries)} times")
        async with self._recovery():
            old_clock = self.clock
            await self._retire()
            why = f"{why} after {self._next_index} frame(s)"
            result = await recover(
                self.device_info, why, driver=self.driver, store=self.store, run_id=self.run_id, keep_open=True,
                log_dir=self.log_dir,
            )  # fmt: skip
            self.recoveries.append(result)
            if not result.recovered or result.session is None:
                raise DeviceUnreachable(f"device {self.device!r}: {result.reason}")
            await self._adopt(result.session)
            self._domain = old_clock
            assert self._loop_start is not None
            # the new agent lost the inputs held for the old loop: it takes the rest as they come (no hold_count)
            await start_fresh(result.session, dataclasses.replace(self._loop_start, hold_count=None))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

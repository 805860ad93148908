"""Pacing on the bench's monotonic clock: sleep until shortly before the due time, then spin.

`asyncio.sleep` alone wakes up late by about a millisecond on a loaded machine (design.md: P50 0.64 ms,
P99 1.18 ms); sleeping until `spin_ns` before the due time and spinning the rest brings the error down
to microseconds, at the cost of a busy core for at most `spin_ns` per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

DEFAULT_SPIN_NS = 1_000_000  # 1 ms
GIL_SWITCH_S = 0.0002  # while pacing: another thread (frame writer, progress display) yields the GIL this fast
RT_PRIORITY = 10  # SCHED_FIFO priority while pacing: above every normal process, below kernel threads
HELPER_RT_PRIORITY = 5  # the process's other threads while pacing: real-time too, below the pacer
PROMOTE_EVERY_S = 0.5  # while pacing, threads started since (a new executor worker) are promoted this often


class Clock(Protocol):
    """Where the pacer reads the time and how it sleeps (the real clock, or a fake one in tests)."""

    def now_ns(self) -> int:
        """Monotonic time in ns."""

    async def sleep(self, seconds: float) -> None:
        """Give control back to the event loop for about `seconds`."""


class MonotonicClock:
    """The bench clock: time.monotonic_ns() and asyncio.sleep."""

    def now_ns(self) -> int:
        """time.monotonic_ns()."""
        return time.monotonic_ns()

    async def sleep(self, seconds: float) -> None:
        """asyncio.sleep(seconds)."""
        await asyncio.sleep(seconds)


class Pacer:
    """Waits until due times: sleeps to `spin_ns` before each, then spins on `clock.now_ns()`."""

    def __init__(self, clock: Clock | None = None, spin_ns: int = DEFAULT_SPIN_NS) -> None:
        self.clock = clock or MonotonicClock()
        self.spin_ns = spin_ns
        self.sleeps = 0
        self.spins = 0

    async def wait_until(self, due_ns: int) -> int:
        """Return at or after `due_ns` (never before it); returns the clock reading at return."""
        now = self.clock.now_ns()
        while due_ns - now > self.spin_ns:
            self.sleeps += 1
            await self.clock.sleep((due_ns - now - self.spin_ns) / 1e9)
            now = self.clock.now_ns()
        if now < due_ns:
            self.spins += 1
            while now < due_ns:
                now = self.clock.now_ns()
        return now


@dataclass
class Realtime:
    """The process under real-time scheduling while pacing: the pacing thread at RT_PRIORITY, every other thread
    of the process at HELPER_RT_PRIORITY (`on` False: not allowed, nothing changed).

    Why the other threads: the pacer needs the GIL after every sleep. A normal-priority thread holding it (a
    serial port's reader, a write handed to the executor, the frame writer) is preempted whenever the host's
    cores are busy, even by the emulators at nice 19 until their slice ends, and the pacer then waits as long:
    the browser's send error P99 was 2.4-8.2 ms beside two counted C6s, 0.3 ms with every thread real-time
    (docs/replay.md)."""

    on: bool
    _before: dict[int, tuple[int, os.sched_param]] = field(default_factory=dict)  # thread id -> its scheduling

    def take(self, tid: int, priority: int) -> None:
        """Put thread `tid` under SCHED_FIFO at `priority` (its children reset to normal), keeping what it had;
        OSError when not allowed or the thread is gone."""
        before = (os.sched_getscheduler(tid), os.sched_getparam(tid))
        os.sched_setscheduler(tid, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority))
        self._before[tid] = before

    def promote_threads(self) -> None:
        """Put the process's threads not yet taken (those started since, too) under HELPER_RT_PRIORITY."""
        if not self.on:
            return
        try:
            tids = [int(t) for t in os.listdir("/proc/self/task")]
        except OSError:
            return
        for tid in tids:
            if tid not in self._before:
                with contextlib.suppress(OSError):  # the thread ended meanwhile
                    self.take(tid, HELPER_RT_PRIORITY)

    async def keep_promoting(self) -> None:
        """Promote threads started while pacing, every PROMOTE_EVERY_S, until cancelled."""
        while self.on:
            await asyncio.sleep(PROMOTE_EVERY_S)
            self.promote_threads()

    def restore_threads(self) -> None:
        """Give every thread taken that is still alive its scheduling back."""
        for tid, (policy, param) in self._before.items():
            with contextlib.suppress(OSError):
                os.sched_setscheduler(tid, policy, param)
        self._before.clear()


@contextlib.contextmanager
def realtime_priority(enabled: bool = True) -> Iterator[Realtime]:
    """Run the calling thread under SCHED_FIFO (children reset to normal), and the process's other threads just
    below it, while inside. On a shared, loaded machine a normal process gets descheduled for milliseconds at a
    time, which no pacing can hide; a real-time priority keeps the pacer on a core. Needs root or
    CAP_SYS_NICE; without them the Realtime is off and nothing changes."""
    realtime = Realtime(enabled and hasattr(os, "SCHED_FIFO"))
    if realtime.on:
        try:
            realtime.take(threading.get_native_id(), RT_PRIORITY)
        except OSError:
            realtime.on = False
    realtime.promote_threads()
    try:
        yield realtime
    finally:
        realtime.restore_threads()


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """Short garbage-collector pauses while inside: everything alive on entry (the plan, the session) is
    moved out of the collector's sight (gc.freeze), so a full collection only walks what was made since,
    instead of taking milliseconds over hundreds of thousands of planned inputs."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def gil_switch_interval(seconds: float = GIL_SWITCH_S) -> Iterator[None]:
    """A short GIL switch interval while inside: when the pacer wakes up while another thread (the frame
    writer, the live progress display) runs Python code, it gets the GIL back within `seconds` instead of
    the default 5 ms."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)

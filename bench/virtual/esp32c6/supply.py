"""The virtual board's supply current, from what its firmware does: the stand-in's answer to a shunt resistor.

The supply is a stream of Spans (a length, a current and the GPIOs' output levels) handed to listeners (the virtual
PPK2), from one of two sources:

- The counted core (the flashed firmware in QEMU -icount, bench.virtual.esp32c6.core): every TICK_S the supply reads
  the firmware's status block and the new events of its ring over QMP (bench.virtual.esp32c6.timeline). Each span is
  then a stretch of the chip's counted clock between two events, exact to the quarter nanosecond: its current is the
  running figure for the cycles the core ran in it and the idle (WAITI) figure for the rest, with the GPIO levels of
  that stretch. The stream's timeline is the counted clock, so the charge of a stretch of work does not depend on the
  host's speed or load: "modelled from counted cycles and the datasheet's currents".
- Otherwise (the unix-port VM, the ROM, reset, no power) a span per tick of the host's clock: on the unix-port VM its
  current is the share of the tick the VM process had the CPU (`/proc/PID/task/*/schedstat`), between the same
  figures; the ROM spins; in reset, light-sleep's figure; without power, nothing.

The supply ticks every TICK_S while a meter measures (`watch`), and every IDLE_TICK_S otherwise: the ring is kept up
with and bad events counted, but no one takes the spans, and a board waiting between tests or nightly stages does
not spend a tenth of a host core on QMP reads. A watch starts with a tick at once, whose spans (the stretch before
it) go out before the watcher is told it is synced: its stream begins there.

A tick that fails (an event the timeline let through that a listener cannot take, QEMU's answer cut short) is
counted in `faults` and the stream goes on with the next tick: nothing board code writes stops it, and `start()`
after a power cycle brings back a stream that had stopped. Events the timeline refused are counted in `refused`.

Figures: ESP32-C6 Series Datasheet v1.2, section 5.6 "Current Consumption", Table 5-8 (modem-sleep, CPU at
160 MHz, all peripheral clocks enabled: CPU running 38 mA, CPU idle (WAITI) 27 mA) and Table 5-9 (light-sleep
180 uA). Radio currents are not modelled: the virtual board has no radio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.energy.spec import modelled_from
from bench.virtual.esp32c6.counted import Q_PER_NS, CoreEvent, CoreStatus
from bench.virtual.esp32c6.timeline import Timeline

ACTIVE_UA = 38_000.0  # modem-sleep, 160 MHz, CPU running (while(1)), peripheral clocks enabled
IDLE_UA = 27_000.0  # modem-sleep, 160 MHz, CPU idle (WAITI), peripheral clocks enabled
LIGHT_SLEEP_UA = 180.0  # light-sleep: what the chip draws held in reset (no figure of its own for EN low)
TICK_S = 0.01  # while a meter measures
IDLE_TICK_S = 0.1  # while none does: the ring (bench.virtual.esp32c6.counted.EVENTS) holds seconds of a frame loop
# what the virtual PPK2's figures are modelled from, by the board's firmware (the report says so beside them)
MODELLED_COUNTED = modelled_from("counted cycles and the datasheet's currents")
MODELLED_VM = modelled_from("the VM process's CPU time and the datasheet's currents")


class CountedClock(Protocol):
    """The counted core as the supply reads it (bench.virtual.esp32c6.core.CountedCore)."""

    async def status(self) -> CoreStatus | None:
        """Its status block, or None."""
        ...

    async def events(self, first: int, count: int) -> list[CoreEvent] | None:
        """Events `first`.. of its ring, or None."""
        ...


@dataclass(frozen=True)
class Span:
    """A stretch of the supply: `dt_q` quarter nanoseconds (of the counted clock, or of the host's between ticks) at
    `current_ua`, with the GPIOs' output levels `gpio` (bit n: GPIOn)."""

    dt_q: int
    current_ua: float
    gpio: int = 0


def cpu_time_ns(pid: int, proc: Path = Path("/proc")) -> int | None:
    """CPU time (ns) the process `pid` has used, summed over its threads; None when it is gone."""
    total = 0
    try:
        for task in (proc / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[0])
    except OSError:
        return None
    return total


def current_for(busy: float, *, app: bool, powered: bool) -> float:
    """The chip's current (uA) for a busy fraction: the app's mix of running and idle; the ROM (download mode,
    boot loop, a hung firmware) spins; held in reset, light-sleep's figure; no supply, nothing."""
    if not powered:
        return 0.0
    if not app:
        return ACTIVE_UA
    busy = min(max(busy, 0.0), 1.0)
    return IDLE_UA + busy * (ACTIVE_UA - IDLE_UA)


class Supply:
    """Streams the board's current in the background; `listeners` get every Span."""

    def __init__(
        self,
        state: Callable[[], tuple[bool, bool, bool, int | None]],
        core: Callable[[], CountedClock | None] = lambda: None,
    ) -> None:
        self._state = state  # () -> (powered, in reset, app running, VM pid)
        self._core = core  # () -> the counted core while it runs the app
        self.listeners: list[Callable[[Span], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._timeline: tuple[CountedClock, Timeline] | None = None
        self._refused_before = 0  # refused by the timelines of earlier boots
        self.faults = 0  # ticks that failed (the stream went on)
        self.watchers = 0  # meters measuring: the supply ticks every TICK_S while there is one
        self._synced: list[Callable[[], None]] = []  # told after the next tick's spans went out
        self._wake = asyncio.Event()

    @property
    def refused(self) -> int:
        """Events of the counted core's ring refused as not the firmware's, all boots told."""
        return self._refused_before + (self._timeline[1].refused if self._timeline is not None else 0)

    def start(self) -> None:
        """Begin streaming (again, when the stream had stopped)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="virtual-supply")

    def watch(self, synced: Callable[[], None]) -> None:
        """A meter starts measuring: tick at once and every TICK_S until `unwatch`; `synced()` once that first tick's
        spans (before the watch) went out."""
        self.watchers += 1
        self._synced.append(synced)
        self._wake.set()

    def unwatch(self) -> None:
        """A meter stopped measuring."""
        self.watchers = max(0, self.watchers - 1)

    async def stop(self) -> None:
        """Stop streaming."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        last_ns = time.monotonic_ns()
        last: tuple[int | None, int] = (None, 0)  # the VM's pid and CPU time at the last tick
        deadline = time.monotonic()
        while True:
            deadline += TICK_S if self.watchers else IDLE_TICK_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - time.monotonic()))
            if self._wake.is_set():  # a watch: its tick now
                self._wake.clear()
                deadline = time.monotonic()
            synced, self._synced = self._synced, []
            now = time.monotonic_ns()
            try:
                spans, last = await self._tick(now, last_ns, last)
                for span in spans:
                    for listener in list(self.listeners):
                        listener(span)
            except Exception:  # a bad tick is counted; the stream goes on
                self.faults += 1
            last_ns = now
            for told in synced:
                told()

    async def _tick(
        self, now: int, last_ns: int, last: tuple[int | None, int]
    ) -> tuple[list[Span], tuple[int | None, int]]:
        """The spans from `last_ns` to `now`, and the VM's (pid, CPU time) now."""
        powered, in_reset, app, pid = self._state()
        core = self._core()
        spans = await self._counted(core, now) if core is not None and powered and not in_reset else None
        if spans is not None:
            return spans, last
        # a tick of the host's clock
        cpu = cpu_time_ns(pid) if pid is not None and core is None else None
        busy = 0.0 if core is None else 1.0  # the counted core before its first status block: booting
        if cpu is not None and pid == last[0]:
            busy = (cpu - last[1]) / max(1, now - last_ns)
        current = LIGHT_SLEEP_UA if powered and in_reset else current_for(busy, app=app, powered=powered)
        return [Span((now - last_ns) * Q_PER_NS, current)], (pid, cpu or 0)

    async def _counted(self, core: CountedClock, now_ns: int) -> list[Span] | None:
        """The spans of the counted clock that the core's new events give; None before its first status block."""
        if self._timeline is None or self._timeline[0] is not core:
            self._refused_before = self.refused
            self._timeline = (core, Timeline())  # a new boot: its clock starts again
        timeline = self._timeline[1]
        status = await core.status()
        if status is None:
            return None
        first, count = timeline.wanted(status)
        events = await core.events(first, count) if count else []
        if events is None:
            return []
        return [Span(s.dt_q, current_for(s.busy, app=True, powered=True), s.gpio)
                for s in timeline.advance(first, events, status, now_ns)]  # fmt: skip

"""The virtual board's supply current, from what its firmware does: the stand-in's answer to a shunt resistor.

Every TICK_S the supply reads how much CPU time the board's MicroPython VM process took since the last tick
(`/proc/PID/task/*/schedstat`, nanoseconds) and turns the busy fraction into a current between the chip's
datasheet figures: CPU running vs. CPU idle (WAITI) in modem-sleep at 160 MHz. A model with more
multiply-accumulates keeps the VM busy longer, so it draws more charge per decision. Each tick's current is
kept (`history`) and handed to listeners (the virtual PPK2), so what the board says it drew and what the meter
streams are the same figures.

On the counted core (the flashed firmware in QEMU -icount, bench.virtual.esp32c6.core) the busy fraction comes
from the firmware's own count instead of the host: each tick reads its status block (QMP), and the fraction is the
busy cycles it counted since the last tick (at the chip's 160 MHz) over the chip time that passed, so the current
follows the firmware's active and wfi time, not the host's load: "modelled from counted cycles and the
datasheet's currents".

Figures: ESP32-C6 Series Datasheet v1.2, section 5.6 "Current Consumption", Table 5-8 (modem-sleep, CPU at
160 MHz, all peripheral clocks enabled: CPU running 38 mA, CPU idle (WAITI) 27 mA) and Table 5-9 (light-sleep
180 uA). Radio currents are not modelled: the virtual board has no radio.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.virtual.esp32c6.counted import CoreState, CoreStatus

ACTIVE_UA = 38_000.0  # modem-sleep, 160 MHz, CPU running (while(1)), peripheral clocks enabled
IDLE_UA = 27_000.0  # modem-sleep, 160 MHz, CPU idle (WAITI), peripheral clocks enabled
LIGHT_SLEEP_UA = 180.0  # light-sleep: what the chip draws held in reset (no figure of its own for EN low)
TICK_S = 0.01
HISTORY_TICKS = 360_000  # one hour of ticks
CHIP_HZ = 160_000_000  # the HP core's clock: one counted instruction is one cycle (6.25 ns)


class CountedClock(Protocol):
    """The counted core as the supply reads it (bench.virtual.esp32c6.core.CountedCore)."""

    async def status(self) -> CoreStatus | None:
        """Its status block, or None."""
        ...


def counted_busy(before: CoreStatus, after: CoreStatus) -> float:
    """The fraction of the chip time between two status blocks the core was busy. The firmware writes the block
    when it goes idle and when it wakes, so a block that did not change says the core stayed as it was: running
    (1) or waiting (0)."""
    chip_ns = after.chip_ns - before.chip_ns
    if chip_ns <= 0:
        return 1.0 if after.state == CoreState.RUN else 0.0
    return min(1.0, max(0.0, (after.busy_cycles - before.busy_cycles) * 1e9 / CHIP_HZ / chip_ns))


@dataclass(frozen=True)
class Tick:
    """One interval of the supply: when it ended (bench clock, ns), how long it was and the mean current."""

    index: int
    t_ns: int
    dt_ns: int
    current_ua: float


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
    """Ticks the board's current in the background; `listeners` get every Tick."""

    def __init__(
        self,
        state: Callable[[], tuple[bool, bool, bool, int | None]],
        core: Callable[[], CountedClock | None] = lambda: None,
    ) -> None:
        self._state = state  # () -> (powered, in reset, app running, VM pid)
        self._core = core  # () -> the counted core while it runs the app
        self.history: deque[Tick] = deque(maxlen=HISTORY_TICKS)
        self.listeners: list[Callable[[Tick], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._index = 0

    def start(self) -> None:
        """Begin ticking."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="virtual-supply")

    async def stop(self) -> None:
        """Stop ticking."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def drawn(self, first: int, last: int) -> dict[str, float]:
        """Charge (uC), time (s) and mean current (uA) of ticks `first`..`last` (inclusive)."""
        ticks = [t for t in self.history if first <= t.index <= last]
        seconds = sum(t.dt_ns for t in ticks) / 1e9
        charge = sum(t.current_ua * t.dt_ns for t in ticks) / 1e9
        return {"ticks": len(ticks), "seconds": seconds, "charge_uc": charge,
                "mean_ua": charge / seconds if seconds else 0.0}  # fmt: skip

    async def _run(self) -> None:
        last_ns = time.monotonic_ns()
        last_pid: int | None = None
        last_cpu = 0
        last_core: tuple[CountedClock, CoreStatus] | None = None
        deadline = time.monotonic()
        while True:
            deadline += TICK_S
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            now = time.monotonic_ns()
            powered, in_reset, app, pid = self._state()
            core = self._core()
            if core is not None:  # the counted core: its own busy and idle time
                status = await core.status()
                busy = 0.0
                if status is not None and last_core is not None and last_core[0] is core:
                    busy = counted_busy(last_core[1], status)
                last_core = (core, status) if status is not None else None
            else:
                last_core = None
                cpu = cpu_time_ns(pid) if pid is not None else None
                busy = 0.0
                if cpu is not None and pid == last_pid:
                    busy = (cpu - last_cpu) / max(1, now - last_ns)
                last_pid, last_cpu = pid, cpu or 0
            current = LIGHT_SLEEP_UA if powered and in_reset else current_for(busy, app=app, powered=powered)
            tick = Tick(self._index, now, now - last_ns, current)
            self._index += 1
            last_ns = now
            self.history.append(tick)
            for listener in list(self.listeners):
                listener(tick)

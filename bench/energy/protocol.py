"""The one power-meter protocol: start, stop, and the samples taken in between, on the bench clock.

A sample is the mean power over an interval that ends at `t_ns` (`time.monotonic_ns()`, the clock the replayer
stamps inputs with) and lasted `dt_ns`. A meter on the bench host (PPK2, Joulescope, a bench-side hwmon sensor)
stamps its own samples; tegrastats over SSH is stamped when each reading arrives, its interval the time since the
reading before it. A meter with `device_clock` (the PMIC, a device hwmon file) stamps each reading with the
device's own clock instead: `t_ns` is then the device's time, the clock its frames' t0..t1 are on.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TypeVar

from bench.core.errors import BenchError
from bench.core.fields import Configured
from bench.core.lifecycle import Sampler
from bench.energy.spec import EnergySpec

S = TypeVar("S")  # a meter's settings class (bench.energy.spec)
FIRST_SAMPLE_S = 10.0  # how long a started meter may take to deliver its first sample (beyond 3 of its periods)


class MeterError(BenchError):
    """A power meter failed (not found, its tool missing, it stopped streaming)."""


@dataclass(frozen=True)
class PowerSample:
    """Mean power (mW) over the `dt_ns` before `t_ns` (bench clock), and the level of the meter's logic input wired
    to the device's inference marker over that time (None: the meter reads no marker)."""

    t_ns: int
    dt_ns: int
    power_mw: float
    marker: int | None = None

    def as_row(self) -> tuple[int, int, float]:
        """(t_ns, dt_ns, power_mw), as stored."""
        return (self.t_ns, self.dt_ns, self.power_mw)


class Meter(Sampler[PowerSample], Configured[S], ABC):
    """One device's power meter, sampling in the background between `start()` and `stop()`; `S` is its driver's
    settings class."""

    def __init__(self, device: str, spec: EnergySpec) -> None:
        Sampler.__init__(self)
        Configured.__init__(self, device, spec)
        # a device-clock meter's readings: (bench time it arrived, the device time it is stamped with), in order
        self.arrivals: list[tuple[int, int]] = []

    @property
    @abstractmethod
    def period_s(self) -> float:
        """How long one sample averages over: what the meter can resolve."""

    @property
    def name(self) -> str:
        """The meter as the report names it (driver and where it is)."""
        return self.spec.driver

    device_clock = False  # its samples are on the device's own clock (the one its frames carry), not the bench's

    def arrived(self, device_ns: int) -> None:
        """A device-clock reading stamped `device_ns` has just arrived (for `at`)."""
        self.arrivals.append((time.monotonic_ns(), device_ns))

    def at(self, bench_ns: int) -> int:
        """The time on the samples' timeline at bench time `bench_ns` (`time.monotonic_ns()`): that time itself, or
        on a device-clock meter the device's time then, interpolated between the readings that arrived just before
        and just after it (an icount guest's clock runs slower than the bench's while it is busy, so no fixed offset
        holds); past the last reading (or before the first) at the bench's rate from it. A reading arrives after
        its stamp by its trip over the link, so the device time is the earlier by that trip, at both ends of a
        block alike."""
        if not self.device_clock or not self.arrivals:
            return bench_ns
        after = bisect.bisect_right(self.arrivals, (bench_ns, float("inf")))
        if after == 0 or after == len(self.arrivals):
            came, stamp = self.arrivals[0 if after == 0 else -1]
            return stamp + (bench_ns - came)
        (a0, d0), (a1, d1) = self.arrivals[after - 1], self.arrivals[after]
        return d0 + round((d1 - d0) * (bench_ns - a0) / (a1 - a0)) if a1 > a0 else d0

    def arrived_after(self, bench_ns: int) -> bool:
        """Whether a reading has arrived after bench time `bench_ns` (always, on a meter on the bench's clock)."""
        return not self.device_clock or bool(self.arrivals and self.arrivals[-1][0] > bench_ns)

    @property
    def marker(self) -> str | None:
        """The input that reads the device's inference marker (e.g. "PPK2 D0"), None when the meter reads none."""
        return None

    async def start(self) -> None:
        """Begin sampling in the background (MeterError when the meter cannot be reached)."""
        await self.open()
        self._begin(self._sample_loop(), f"meter-{self.device}")

    async def first_sample(self, count: int = 1) -> None:
        """Return once the meter has delivered `count` samples: a block measured from then on is covered from its
        start (a PPK2's reader starts streaming some time after it answered). MeterError naming the device when none
        came within FIRST_SAMPLE_S plus `count` + 2 sample periods, or when sampling failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FIRST_SAMPLE_S + (count + 2) * self.period_s
        while len(self.samples) < count:
            if self.errors:
                raise MeterError(self.errors[-1])
            if loop.time() > deadline:
                within = FIRST_SAMPLE_S + (count + 2) * self.period_s
                got = f"{len(self.samples)} of {count} samples" if self.samples else "no sample"
                raise MeterError(f"device {self.device!r}: meter {self.name}: {got} within {within:g} s of its start")
            await asyncio.sleep(0.01)

    async def more_samples(self, count: int, timeout_s: float) -> None:
        """Return once the meter holds `count` samples, or `timeout_s` has passed (a slow device's readings come
        late; what came is used), or sampling failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(self.samples) < count and not self.errors and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def _sample_loop(self) -> None:
        try:
            await self.run()
        except BenchError as exc:
            self.errors.append(str(exc))
        except OSError as exc:
            self.errors.append(f"device {self.device!r}: meter {self.name}: {exc}")

    async def open(self) -> None:
        """Reach the meter (nothing for meters that start with their first reading)."""

    @abstractmethod
    async def run(self) -> None:
        """Append samples to `self.samples` until cancelled."""

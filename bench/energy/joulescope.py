"""A Joulescope JS220 / JS110 through pyjoulescope_driver: the instrument's own statistics (mean power over each
1/frequency_hz), stamped on the bench clock when they arrive. Recordings (.jls) are read by
`bench.energy.parse.read_jls`, through Joulescope's own reader."""

from __future__ import annotations

import time
from typing import Any

from bench.energy.protocol import Meter, MeterError, PowerSample
from bench.energy.spec import JoulescopeSettings

STATS_BASE_HZ = {"js220": 1_000_000, "js110": 2_000_000}  # the sample rate the statistics' `scnt` counts in


def stats_power_mw(value: dict[str, Any]) -> float | None:
    """Mean power (mW) of one statistics message of pyjoulescope_driver (`.../s/stats/value`)."""
    try:
        return float(value["signals"]["power"]["avg"]["value"]) * 1000.0
    except (KeyError, TypeError, ValueError):
        return None


class JoulescopeMeter(Meter[JoulescopeSettings]):
    """One Joulescope; its statistics arrive on the driver's thread and are stamped there."""

    _driver: Any = None
    _path: str | None = None

    @property
    def period_s(self) -> float:
        return 1.0 / self.settings.frequency_hz

    @property
    def name(self) -> str:
        return f"Joulescope {self._path or self.settings.device or '(first found)'}"

    async def open(self) -> None:
        from pyjoulescope_driver import Driver

        driver = Driver()
        paths = [p for p in driver.device_paths() if not self.settings.device or p.startswith(self.settings.device)]
        if not paths:
            driver.finalize()
            raise MeterError(f"device {self.device!r}: no Joulescope found" +
                             (f" at {self.settings.device}" if self.settings.device else ""),
                             hint="is it plugged in (and its udev rule installed)?")  # fmt: skip
        self._driver, self._path = driver, paths[0]
        model = "js110" if "js110" in self._path else "js220"
        driver.open(self._path)
        driver.publish(f"{self._path}/s/i/range/mode", "auto")
        driver.publish(f"{self._path}/s/stats/scnt", max(1, STATS_BASE_HZ[model] // self.settings.frequency_hz))
        driver.publish(f"{self._path}/s/stats/ctrl", 1)
        driver.subscribe(f"{self._path}/s/stats/value", "pub", self._on_stats)

    def _on_stats(self, _topic: str, value: dict[str, Any]) -> None:
        power = stats_power_mw(value)
        if power is not None:
            self.samples.append(PowerSample(time.monotonic_ns(), round(self.period_s * 1e9), power))

    async def run(self) -> None:
        import asyncio

        await asyncio.Event().wait()  # the samples come on the driver's thread

    async def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            driver.publish(f"{self._path}/s/stats/ctrl", 0)
            driver.close(self._path)
            driver.finalize()

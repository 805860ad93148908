"""A hwmon sensor on the bench host (an INA219/INA226 in a board's supply line): its files read every interval."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bench.core.fields import resolve_path
from bench.energy.parse import hwmon_power_mw
from bench.energy.protocol import Meter, MeterError, PowerSample
from bench.energy.spec import HwmonSettings


class BenchHwmonMeter(Meter[HwmonSettings]):
    """Reads `power` (uW), or `current` (mA) and `voltage` (mV), from the bench host's sysfs."""

    @property
    def period_s(self) -> float:
        return self.settings.interval_ms / 1000

    @property
    def name(self) -> str:
        return f"hwmon {self.settings.power or self.settings.current} (on the bench host)"

    def _file(self, value: str | None) -> Path | None:
        return resolve_path(value, self.spec.base_dir) if value else None

    def read_once(self) -> float:
        """One reading (mW); MeterError naming the file when it cannot be read."""
        s = self.settings
        power, current, voltage = self._file(s.power), self._file(s.current), self._file(s.voltage)
        try:
            if power is not None:
                return hwmon_power_mw(power_uw=power.read_text())
            volts: str | float | None = voltage.read_text() if voltage is not None else s.voltage_mv
            assert current is not None
            return hwmon_power_mw(current_ma=current.read_text(), voltage=volts)
        except OSError as exc:
            raise MeterError(f"device {self.device!r}: hwmon: {exc.filename}: {exc.strerror}") from None

    async def open(self) -> None:
        self.read_once()  # a wrong path fails the start, not silently the run

    async def run(self) -> None:
        last = time.monotonic_ns() - round(self.period_s * 1e9)
        while True:
            value = await asyncio.to_thread(self.read_once)
            now = time.monotonic_ns()
            self.samples.append(PowerSample(now, now - last, value))  # a reading stands for the time since the last
            last = now
            await asyncio.sleep(self.period_s)

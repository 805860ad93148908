"""A Nordic Power Profiler Kit II (real or the virtual ESP32-C6's), read through ppk2-api in a child process
(`bench.energy.ppk2_reader`): power = the current it measures x the voltage it sources."""

from __future__ import annotations

import asyncio
import json
import sys

from bench.energy.protocol import Meter, MeterError, PowerSample
from bench.energy.spec import Ppk2Settings
from bench.procs import stop_process, tied

OPEN_TIMEOUT_S = 10.0


class Ppk2Meter(Meter):
    """One PPK2 on a serial port."""

    _proc: asyncio.subprocess.Process | None = None

    @property
    def settings(self) -> Ppk2Settings:
        """The fleet file's settings of this meter."""
        return self.spec.settings  # type: ignore[return-value]

    @property
    def period_s(self) -> float:
        return self.settings.bin_us / 1e6

    @property
    def name(self) -> str:
        return f"PPK2 at {self.settings.port} ({self.settings.mode} meter, {self.settings.voltage_mv} mV)"

    async def open(self) -> None:
        """Start the reader; MeterError when no PPK2 answers on the port."""
        s = self.settings
        if s.port is None:
            raise MeterError(f"device {self.device!r}: field 'energy.port': missing", hint="the PPK2's serial port")
        argv = [sys.executable, "-m", "bench.energy.ppk2_reader", "--port", s.port, "--voltage-mv",
                str(s.voltage_mv), "--mode", s.mode, "--bin-us", str(s.bin_us)]  # fmt: skip
        self._proc = await asyncio.create_subprocess_exec(
            *tied(argv), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        assert self._proc.stdout is not None
        try:
            first = json.loads(await asyncio.wait_for(self._proc.stdout.readline(), OPEN_TIMEOUT_S) or b"{}")
        except (TimeoutError, ValueError):
            first = {"error": "the reader did not answer"}
        if not first.get("ok"):
            await self.close()
            raise MeterError(f"device {self.device!r}: PPK2 at {s.port}: {first.get('error', 'no answer')}",
                             hint="is the PPK2 plugged in, and the port right?")  # fmt: skip

    async def run(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        mv = self.settings.voltage_mv
        while line := await self._proc.stdout.readline():
            end, dt, ua = line.split()
            self.samples.append(PowerSample(int(end), int(dt), float(ua) * mv / 1e6))
        raise MeterError(f"device {self.device!r}: PPK2 at {self.settings.port}: the reader stopped")

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdout is not None and proc.returncode is None:
            proc.terminate()
            rest = await proc.stdout.read()  # the bins it printed before it stopped
            mv = self.settings.voltage_mv
            for line in rest.splitlines():
                end, dt, ua = line.split()
                self.samples.append(PowerSample(int(end), int(dt), float(ua) * mv / 1e6))
        await stop_process(proc, 5)

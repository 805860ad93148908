"""A Nordic Power Profiler Kit II (real or the virtual ESP32-C6's), read through ppk2-api in a child process
(`bench.energy.ppk2_reader`): power = the current it measures x the voltage it sources. With a `logic_channel`
(the logic input wired to the device's inference marker) each sample also carries that input's level, and the
reader's bins end at its edges."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from typing import IO

from bench.core.procs import signal_child, stop_process, tied
from bench.energy.protocol import Meter, MeterError, PowerSample
from bench.energy.spec import Ppk2Settings

OPEN_TIMEOUT_S = 10.0


class Ppk2Meter(Meter[Ppk2Settings]):
    """One PPK2 on a serial port."""

    _proc: asyncio.subprocess.Process | None = None
    _log: IO[bytes] | None = None

    @property
    def period_s(self) -> float:
        return self.settings.bin_us / 1e6

    @property
    def name(self) -> str:
        s = self.settings
        modelled = f"; {self.spec.modelled}" if self.spec.modelled else ""
        return f"PPK2 at {s.port} ({s.mode} meter, {s.voltage_mv} mV{modelled})"

    @property
    def marker(self) -> str | None:
        channel = self.settings.logic_channel
        return None if channel is None else f"PPK2 D{channel}"

    async def open(self) -> None:
        """Start the reader; MeterError when no PPK2 answers on the port."""
        s = self.settings
        if s.port is None:
            raise MeterError(f"device {self.device!r}: field 'energy.port': missing", hint="the PPK2's serial port")
        argv = [sys.executable, "-m", "bench.energy.ppk2_reader", "--port", s.port, "--voltage-mv",
                str(s.voltage_mv), "--mode", s.mode, "--bin-us", str(s.bin_us)]  # fmt: skip
        if s.logic_channel is not None:
            argv += ["--logic-channel", str(s.logic_channel)]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (the reader's stderr, kept until close())
        self._proc = await asyncio.create_subprocess_exec(*tied(argv), stdout=asyncio.subprocess.PIPE, stderr=self._log)
        assert self._proc.stdout is not None
        try:
            first = json.loads(await asyncio.wait_for(self._proc.stdout.readline(), OPEN_TIMEOUT_S) or b"{}")
        except (TimeoutError, ValueError):
            first = {"error": "the reader did not answer"}
        if not first.get("ok"):
            if "error" not in first:  # it died: say how
                await self._proc.wait()
                self._log.seek(0)
                lines = self._log.read().decode("utf-8", "replace").strip().splitlines()
                first["error"] = f"the reader exited: {lines[-1] if lines else 'no output'}"
            await self.close()
            raise MeterError(f"device {self.device!r}: PPK2 at {s.port}: {first.get('error', 'no answer')}",
                             hint="is the PPK2 plugged in, and the port right?")  # fmt: skip

    def _take(self, line: bytes) -> None:
        """One `@ END_NS DT_NS CURRENT_UA [LEVEL]` line of the reader (its other lines are ppk2-api's remarks)."""
        parts = line.split()
        if len(parts) in (4, 5) and parts[0] == b"@":
            mw = float(parts[3]) * self.settings.voltage_mv / 1e6
            level = int(parts[4]) if len(parts) == 5 else None
            self.samples.append(PowerSample(int(parts[1]), int(parts[2]), mw, level))

    async def run(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            self._take(line)
        raise MeterError(f"device {self.device!r}: PPK2 at {self.settings.port}: the reader stopped")

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.stdout is not None and proc.returncode is None:
            signal_child(proc, signal.SIGTERM)
            for line in (await proc.stdout.read()).splitlines():  # the bins it printed before it stopped
                self._take(line)
        await stop_process(proc, 5)
        if self._log is not None:
            self._log.close()
            self._log = None

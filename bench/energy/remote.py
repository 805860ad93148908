"""Meters read on a Linux board over its SSH link: tegrastats' INA3221 rails (Jetson), `vcgencmd pmic_read_adc`
(Raspberry Pi 5), a hwmon power or current file (a Jetson's INA3221 channels). A reading stands for the time
since the reading before it (the first, for one reading period). tegrastats' lines are stamped on the bench clock
when they arrive; the PMIC's and hwmon's readings on the device's own clock (`/proc/uptime`, read with each one),
the clock its frames are stamped on, so its decisions are windowed with no clock mapping."""

from __future__ import annotations

import shlex
import time

from bench.core.procs import stop_process
from bench.energy.parse import hwmon_power_mw, pmic_power_mw, tegrastats_power_mw
from bench.energy.protocol import Meter, MeterError, PowerSample, S
from bench.energy.spec import EnergySpec, HwmonSettings, PmicSettings, TegrastatsSettings
from bench.links.ssh import SshConnection

BLOCK_END = "@end"
STOP_GRACE_S = 5.0  # for the meter's command over SSH to end once asked, before it is killed


class RemoteMeter(Meter[S]):
    """A meter whose readings a command on the device prints (one line or one `@end`-terminated block each)."""

    def __init__(self, device: str, spec: EnergySpec, connection: SshConnection, *, owns: bool = False) -> None:
        super().__init__(device, spec)
        self.connection = connection
        self.owns = owns  # the meter opened the connection itself, and closes it
        self._proc = None

    @property
    def period_s(self) -> float:
        return self.settings.interval_ms / 1000

    def command(self) -> str:
        """The remote command that streams readings."""
        raise NotImplementedError

    def reading(self, text: str) -> float | None:
        """Power (mW) from one line or block; None when it holds no reading."""
        raise NotImplementedError

    blocks = True  # readings end with BLOCK_END lines (tegrastats prints one line per reading)
    # device_clock (a subclass's): each block starts with the device's /proc/uptime, the reading's stamp

    @property
    def modelled(self) -> str:
        """The meter name's "; modelled from ..." of a virtual board's sensor ("" on a real board)."""
        return f"; {self.spec.modelled}" if self.spec.modelled else ""

    async def run(self) -> None:
        self._proc = await self.connection.stream(self.command())
        assert self._proc.stdout is not None
        block: list[str] = []
        last = -1 if self.device_clock else time.monotonic_ns() - round(self.period_s * 1e9)
        while raw := await self._proc.stdout.readline():
            line = raw.decode("utf-8", "replace").rstrip("\n")
            now = time.monotonic_ns()
            if self.blocks and line.strip() != BLOCK_END:
                block.append(line)
                continue
            text = "\n".join(block) if self.blocks else line
            block = []
            if self.device_clock:  # the first reading only starts the clock: what time it stands for is unknown
                now, text = device_ns(text), text.partition("\n")[2]
                self.arrived(now)
                if last < 0:
                    last = now
                    continue
            power = self.reading(text)
            if power is not None:  # a reading stands for the time since the last one
                self.samples.append(PowerSample(now, now - last, power))
                last = now
        status = await self._proc.wait()
        if not self.samples:
            raise MeterError(f"device {self.device!r}: meter {self.name}: the command ended without a reading "
                             f"(exit status {status})")  # fmt: skip

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        await stop_process(proc, STOP_GRACE_S)
        if self.owns:
            await self.connection.close()


class TegrastatsMeter(RemoteMeter[TegrastatsSettings]):
    """A Jetson's rail power from `tegrastats --interval N`."""

    blocks = False

    @property
    def name(self) -> str:
        return f"tegrastats {self.settings.rail}{self.modelled}"

    def command(self) -> str:
        return f"exec tegrastats --interval {self.settings.interval_ms}"

    def reading(self, text: str) -> float | None:
        return tegrastats_power_mw(text, self.settings.rail)


class PmicMeter(RemoteMeter[PmicSettings]):
    """A Raspberry Pi 5's rails (current x voltage, summed) from `vcgencmd pmic_read_adc`."""

    @property
    def name(self) -> str:
        return f"vcgencmd pmic_read_adc (sum of PMIC rails{self.modelled})"

    device_clock = True

    def command(self) -> str:
        read = f"cat /proc/uptime && vcgencmd pmic_read_adc || exit 127; echo {BLOCK_END}"
        return f"while :; do {read}; sleep {self.period_s:g}; done"

    def reading(self, text: str) -> float | None:
        return pmic_power_mw(text) if text.strip() else None


class DeviceHwmonMeter(RemoteMeter[HwmonSettings]):
    """A hwmon sensor file on the device (a path may hold a shell glob: `hwmon/hwmon*/curr1_input`)."""

    device_clock = True

    @property
    def name(self) -> str:
        return f"hwmon {self.settings.power or self.settings.current} (on the device{self.modelled})"

    def command(self) -> str:
        s = self.settings
        files = [_quoted(f) for f in (s.power, s.current, s.voltage) if f]  # one `cat` a reading, the uptime first
        cat = " ".join(["cat", "/proc/uptime", *files])
        return f"while :; do {cat} || exit 127; echo {BLOCK_END}; sleep {self.period_s:g}; done"

    def reading(self, text: str) -> float | None:
        lines = text.split()
        if not lines:
            return None
        s = self.settings
        if s.power:
            return hwmon_power_mw(power_uw=lines[0])
        return hwmon_power_mw(current_ma=lines[0], voltage=lines[1] if s.voltage else s.voltage_mv)


def _quoted(path: str) -> str:
    """`path` quoted for the device's shell, its glob characters left to expand (hwmon numbers vary by boot)."""
    return "".join(c if c in "*?" else shlex.quote(c) if not (c.isalnum() or c in "/._-") else c for c in path)


def device_ns(block: str) -> int:
    """The device-clock time (ns) of a reading block whose first line is the device's `/proc/uptime`."""
    first = block.partition("\n")[0].split()
    try:
        return round(float(first[0]) * 1e9)
    except (IndexError, ValueError):
        raise MeterError(f"not a /proc/uptime line before the reading: {block.partition(chr(10))[0]!r}") from None

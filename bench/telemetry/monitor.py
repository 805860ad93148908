"""A background telemetry monitor over a device's SSH connection.

A Jetson streams `tegrastats`; a Pi (or any Linux board) runs a POSIX-shell sampler that prints its
thermal zones, cpufreq files, /proc/meminfo and, where present, `vcgencmd get_throttled`. Each sample
is stamped with the bench clock (`time.monotonic_ns()`) when it arrives. If the SSH connection drops,
the monitor reconnects (through the connection's backoff) and carries on; the gap shows in the stamps.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

from bench.core.errors import BenchError
from bench.core.lifecycle import Sampler
from bench.core.procs import stop_process
from bench.links.ssh import SSH_ERROR_STATUS, SshConnection
from bench.telemetry.parse import parse_pi_block, parse_tegrastats

STOP_GRACE_S = 2.0  # for the sampler over SSH to end once asked, before it is killed

# Units of the values a sample may hold (by name prefix/suffix).
UNITS = {"_c": "degC", "_mhz": "MHz", "_mb": "MB", "_pct": "%", "_mw": "mW"}

PI_SAMPLER = r"""SYS="${HILBENCH_SYSFS:-/sys}"
while :; do
  echo "@sample"
  for z in "$SYS"/class/thermal/thermal_zone*; do
    [ -r "$z/temp" ] && echo "zone $(cat "$z/type" 2>/dev/null || echo zone) $(cat "$z/temp")"
  done
  for c in "$SYS"/devices/system/cpu/cpu[0-9]*/cpufreq; do
    [ -r "$c/scaling_cur_freq" ] || continue
    top=$(cat "$c/scaling_max_freq" 2>/dev/null || echo -)
    echo "freq ${c%/cpufreq} $(cat "$c/scaling_cur_freq") $top"
  done
  grep -E '^(MemTotal|MemAvailable):' /proc/meminfo
  command -v vcgencmd >/dev/null 2>&1 && vcgencmd get_throttled
  echo "@end"
  sleep INTERVAL
done"""


def unit_of(name: str) -> str:
    """The unit of a telemetry value, from its name."""
    return next((unit for suffix, unit in UNITS.items() if name.endswith(suffix)), "")


@dataclass
class Sample:
    """One telemetry reading: bench time of arrival and named values."""

    t_ns: int
    source: str  # "tegrastats" or "sysfs"
    values: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"t_ns": self.t_ns, "source": self.source, "values": self.values}


def summarize(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """min/mean/max (and unit) of every value over `samples`."""
    series: dict[str, list[float]] = {}
    for sample in samples:
        for name, value in sample.values.items():
            series.setdefault(name, []).append(value)
    return {
        name: {
            "min": min(vals),
            "mean": statistics.fmean(vals),
            "max": max(vals),
            "n": len(vals),
            "unit": unit_of(name),
        }
        for name, vals in series.items()
    }


class TelemetryMonitor(Sampler[Sample]):
    """Samples a device's telemetry in the background between `start()` and `stop()`."""

    def __init__(self, connection: SshConnection, source: str, interval_s: float = 0.5) -> None:
        if source not in ("tegrastats", "sysfs"):
            raise ValueError(f"unknown telemetry source {source!r}")
        super().__init__()
        self.connection = connection
        self.source = source
        self.interval_s = interval_s
        self._proc: asyncio.subprocess.Process | None = None

    def command(self) -> str:
        """The remote command that streams this monitor's raw text."""
        if self.source == "tegrastats":
            return f"exec tegrastats --interval {max(1, int(self.interval_s * 1000))}"
        return PI_SAMPLER.replace("INTERVAL", f"{self.interval_s:g}")

    async def start(self) -> None:
        """Begin sampling in the background."""
        self._begin(self._run(), f"telemetry-{self.connection.device}")

    async def close(self) -> None:
        """End the remote command."""
        await self._end_proc()

    async def _end_proc(self) -> None:
        proc, self._proc = self._proc, None
        await stop_process(proc, STOP_GRACE_S)

    async def _run(self) -> None:
        while True:
            try:
                taken = await self._stream_once()
            except BenchError as exc:  # the connection stayed down past its backoff
                self.errors.append(str(exc))
                return
            status = self._proc.returncode if self._proc is not None else None
            await self._end_proc()
            if taken == 0 and status != SSH_ERROR_STATUS:  # the sampler itself failed, not the connection
                self.errors.append(self._no_sample_error(status))
                return
            await asyncio.sleep(self.interval_s)  # the stream ended (dropped connection): start it again

    def _no_sample_error(self, status: int | None) -> str:
        where = f"device {self.connection.device!r}: telemetry ({self.source})"
        if status == 127:
            return f"{where}: tegrastats not found on the device; set telemetry = 'sysfs' in the fleet file"
        return f"{where}: the sampler ended without a sample (exit status {status})"

    async def _stream_once(self) -> int:
        """Read one stream until it ends; return how many samples it gave."""
        self._proc = await self.connection.stream(self.command())
        assert self._proc.stdout is not None
        taken = 0
        block: list[str] = []
        while raw := await self._proc.stdout.readline():
            line = raw.decode("utf-8", "replace").strip()
            now = time.monotonic_ns()
            values: dict[str, float] = {}
            if self.source == "tegrastats":
                values = parse_tegrastats(line)
            elif line == "@sample":
                block = []
            elif line == "@end":
                values = parse_pi_block(block)
            else:
                block.append(line)
            if values:
                self.samples.append(Sample(now, self.source, values))
                taken += 1
        await self._proc.wait()
        return taken

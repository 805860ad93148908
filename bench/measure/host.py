"""How busy the bench host was while a run measured: its own CPU, the bench's, and everyone else's.

Virtual devices run on the bench host's CPUs, so their timing moves with whatever else the host runs;
a verdict on them needs to know. psutil reads the host's CPU times (/proc/stat: busy, steal) and the CPU
of the bench's process tree (the bench and the virtual devices it started)."""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

import psutil

QUIET_WINDOW_S = 5.0  # a host is quiet when it was over a window this long (wait_until_quiet)


@dataclass(frozen=True)
class HostNoise:
    """The bench host during one run. Percentages are of the host's whole capacity (all cores)."""

    host: str
    cpu: str
    cores: int
    seconds: float
    load_start: float  # 1-minute load average
    load_end: float
    busy_pct: float  # CPU time used on the host
    bench_pct: float  # ...by the bench and the processes it started (virtual devices, tools)
    others_pct: float  # ...by every other process (busy - bench)
    steal_pct: float  # taken by the hypervisor from this (virtual) host

    @property
    def load_pct(self) -> float:
        """What the host gave to others than the bench: other processes and steal."""
        return self.others_pct + self.steal_pct

    def busy(self, limit_pct: float) -> bool:
        """True when other processes (and steal) took more than `limit_pct` of the host during the run."""
        return self.load_pct > limit_pct

    def describe(self) -> str:
        """A short sentence: what else used the host."""
        steal = f", steal {self.steal_pct:.0f}%" if self.steal_pct >= 1 else ""
        return f"other processes {self.others_pct:.0f}% of {self.cores} CPUs{steal}, load {self.load_end:.1f}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostNoise:
        """Read back `to_json()` (fields a store lacks read as 0 or "")."""
        blank: dict[str, Any] = {f.name: "" if f.type == "str" else 0 for f in fields(cls)}
        return cls(**{**blank, **{k: v for k, v in data.items() if k in blank}})


def host_identity() -> dict[str, Any]:
    """Name, CPU model and core count of the bench host."""
    return {"host": socket.gethostname(), "cpu": _cpu_model(), "cores": psutil.cpu_count() or 1}


class HostNoiseMeter:
    """Call `stop()` after the run; the meter started when it was made."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._cpu0 = psutil.cpu_times()
        self._tree0 = _tree_cpu()
        self._load0 = os.getloadavg()[0]

    def stop(self) -> HostNoise:
        """The host's noise since the meter was made."""
        seconds = max(time.monotonic() - self._t0, 1e-6)
        cpu1 = psutil.cpu_times()
        tree1 = _tree_cpu()
        ident = host_identity()
        capacity = seconds * ident["cores"]
        idle = (cpu1.idle + getattr(cpu1, "iowait", 0.0)) - (self._cpu0.idle + getattr(self._cpu0, "iowait", 0.0))
        total = sum(cpu1) - sum(self._cpu0)
        steal = getattr(cpu1, "steal", 0.0) - getattr(self._cpu0, "steal", 0.0)
        busy = max(0.0, total - idle - steal)
        bench = sum(v - self._tree0.get(k, 0.0) for k, v in tree1.items())
        busy_pct = 100.0 * busy / capacity
        bench_pct = min(busy_pct, 100.0 * bench / capacity)
        return HostNoise(
            host=ident["host"], cpu=ident["cpu"], cores=ident["cores"], seconds=round(seconds, 3),
            load_start=round(self._load0, 2), load_end=round(os.getloadavg()[0], 2),
            busy_pct=round(busy_pct, 1), bench_pct=round(bench_pct, 1),
            others_pct=round(max(0.0, busy_pct - bench_pct), 1), steal_pct=round(100.0 * steal / capacity, 1),
        )  # fmt: skip


async def wait_until_quiet(limit_pct: float, max_wait_s: float, window_s: float = QUIET_WINDOW_S) -> HostNoise:
    """Wait until, over a window of `window_s`, processes outside the bench (and steal) took at most `limit_pct`
    of the host, for `max_wait_s` at most; the last window's noise (`busy(limit_pct)` says whether it quieted)."""
    deadline = time.monotonic() + max_wait_s
    while True:
        meter = HostNoiseMeter()
        await asyncio.sleep(window_s)
        noise = meter.stop()
        if not noise.busy(limit_pct) or time.monotonic() >= deadline:
            return noise


def _tree_cpu() -> dict[tuple[int, float], float]:
    """(pid, start time) -> CPU seconds (own and reaped children's) of this process and its descendants."""
    me = psutil.Process()
    out: dict[tuple[int, float], float] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            out[(proc.pid, proc.create_time())] = t.user + t.system + t.children_user + t.children_system
        except psutil.Error:  # it ended meanwhile
            continue
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

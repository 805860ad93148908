"""The bench host's noise during a run: CPU of the bench's own process tree versus everyone else's."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.measure.host import HostNoise, HostNoiseMeter


def test_the_benchs_own_children_count_as_bench_not_as_other_processes() -> None:
    meter = HostNoiseMeter()
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"])
    child.wait()
    time.sleep(0.1)
    noise = meter.stop()
    assert noise.cores >= 1 and noise.seconds >= 1.5
    assert noise.bench_pct > 5  # a busy child for 1.5 s: its CPU is the bench's
    assert abs(noise.busy_pct - noise.bench_pct - noise.others_pct) < 0.2
    assert 0 <= noise.others_pct <= 100 and noise.steal_pct >= 0


def test_busy_means_other_processes_above_the_limit_and_reads_back() -> None:
    noise = HostNoise("h", "cpu", 2, 30.0, 1.0, 2.5, 90.0, 20.0, 70.0, 0.0)
    assert noise.busy(25.0) and not noise.busy(80.0)
    assert noise.describe() == "other processes 70% of 2 CPUs, load 2.5"
    assert HostNoise.from_json(noise.to_json()) == noise
    assert HostNoise.from_json({"others_pct": 30.0}).busy(25.0)

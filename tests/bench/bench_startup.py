"""Benchmark: how long `hilbench` commands take to start and answer, next to esptool's and mpremote's.

Each command runs N times as a fresh process from an empty folder (the bundled virtual fleet, nothing
touched); the table gives the median and the best wall time. The goal (issue 32) is under 0.5 s for
`hilbench --version` and `hilbench fleet list`; esptool and mpremote start in about 0.2 s.

    python -m tests.bench bench_startup [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "fixtures" / "sessions" / "combat.mcap"
GOAL_S = 0.5
COMMANDS = [
    ("hilbench --version", ["-m", "bench", "--version"], True),
    ("hilbench fleet list", ["-m", "bench", "fleet", "list"], True),
    ("hilbench fleet list --json", ["-m", "bench", "fleet", "list", "--json"], False),
    ("hilbench session info (a fixture)", ["-m", "bench", "session", "info", str(SESSION)], False),
    ("hilbench baseline list", ["-m", "bench", "baseline", "list", "--results", "r.sqlite"], False),
    ("hilbench --help (loads every command)", ["-m", "bench", "--help"], False),
    ("python -m esptool version", ["-m", "esptool", "version"], False),
    ("mpremote --help", ["-m", "mpremote", "--help"], False),
    ("python -c pass (the interpreter alone)", ["-c", "pass"], False),
]  # fmt: skip


def timed(argv: list[str], cwd: str, runs: int) -> list[float]:
    """Wall seconds of `runs` fresh runs of `python ARGV` (output discarded)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("HILBENCH_FLEET", None)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    """Print one row per command: median and best of the runs, and the goal where there is one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command (default 5)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}  load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}  "
          f"{os.cpu_count()} cores  {sys.executable} ({sys.version.split()[0]})")  # fmt: skip
    print(f"{'command':<40} {'median s':>9} {'best s':>7}  goal")
    with tempfile.TemporaryDirectory() as empty:
        for label, argv, goal in COMMANDS:
            times = timed(argv, empty, args.runs)
            mark = f"< {GOAL_S} s: {'met' if min(times) < GOAL_S else 'NOT met'}" if goal else ""
            print(f"{label:<40} {statistics.median(times):>9.3f} {min(times):>7.3f}  {mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

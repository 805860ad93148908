"""Benchmark: what reading a large session and planning its replay cost, in time and peak memory.

A session of N gaze messages (3 floats each) packed into one second, as an eye tracker at a silly rate or a
hostile file would give, is written once, then read (`read_session`: every message decoded and checked) and
planned (`build_plan`: every message encoded as a protocol line, as a replay holds them) in a fresh process
each, whose peak RSS is taken from the kernel. The goal: 10^6 messages read and planned within 1 GiB and
60 s; a session may hold at most `MAX_MESSAGES` (bench/replay/recording.py), so this bounds a replay's memory.

    python -m tests.bench bench_session_memory [--messages 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.replay.recording import MAX_MESSAGES, Session, SessionMessage, write_session

ROOT = Path(__file__).resolve().parents[2]

GOAL_MESSAGES = 1_000_000
GOAL_RSS_MB = 1024
GOAL_S = 60.0

CHILD = """
import json, resource, sys, time
from bench.agent import wire
from bench.replay.plan import build_plan
from bench.replay.recording import read_session
t = time.perf_counter()
session = read_session(sys.argv[1])
read_s = time.perf_counter() - t
read_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
plan = build_plan(session, wire.encode)
plan_s = time.perf_counter() - t
print(json.dumps({"messages": len(session.messages), "read_s": read_s, "read_mb": read_mb, "plan_s": plan_s,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make(path: Path, n: int) -> None:
    """A session of `n` gaze messages within one second."""
    step = max(1, 1_000_000_000 // n)
    write_session(
        path, Session("bench", "combat", [SessionMessage(k * step, "gaze", (0.5, 0.25, 1.0)) for k in range(n)])
    )


def measure(path: Path) -> dict:
    """Read and plan `path` in a fresh process; its figures."""
    run = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    return json.loads(run.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, nargs="+", default=[100_000, GOAL_MESSAGES])
    args = parser.parse_args()
    print(f"goal: {GOAL_MESSAGES} messages read and planned within {GOAL_RSS_MB} MiB and {GOAL_S:g} s "
          f"(a session holds at most {MAX_MESSAGES})")  # fmt: skip
    print(f"{'messages':>9} {'file MB':>8} {'read s':>7} {'read MiB':>9} {'plan s':>7} {'peak MiB':>9} {'B/msg':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.messages:
            path = Path(tmp) / f"s{n}.mcap"
            make(path, n)
            f = measure(path)
            per = f["peak_mb"] * 1024 * 1024 / n
            print(f"{n:>9} {path.stat().st_size / 1e6:>8.1f} {f['read_s']:>7.1f} {f['read_mb']:>9.0f} "
                  f"{f['plan_s']:>7.1f} {f['peak_mb']:>9.0f} {per:>7.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: render a run's report from a results store holding 30 runs x 4 devices x 100k frames
(goal: under 5 s).

    python -m tests.bench bench_report [--runs 30] [--devices 4] [--frames 100000] [--repeat 3] [--keep DIR]

Setup (not timed; ~2 min and ~1 GB for the defaults) writes the store through its API: every run gets its
frame records, HDR histograms, measurements and faults, like a replay run; run 1 is the baseline and the
last run has a +25% latency regression on one device. With --keep DIR an existing store there is reused.
Timed, each repeat in a fresh Python process as `hilbench report` would run: "cold" = process start to
report written (imports included), wall clock; "cpu" = that process's CPU time (the fair figure on a shared
machine: compare with "load_avg_1m"); "render" = `publish_run` on the last run alone, i.e. loading it and the
baseline from the store (frames, histograms), every verdict, 30 runs of trends, plots, HTML and the files.
Prints one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.store.results import open_store
from tests.stored_runs import build_store

ROOT = Path(__file__).resolve().parents[2]


def render_once(store_path: Path, run_id: int, reports: Path) -> None:
    """One timed render in this process; prints {"render_s", "regressions", "page"} as JSON."""
    from bench.report.publish import publish_run

    start = time.perf_counter()
    with open_store(store_path) as store:
        published = publish_run(store, run_id, reports_dir=reports)
    elapsed = time.perf_counter() - start
    regressed = sorted({v.device for v in published.regressions})
    print(json.dumps({"render_s": elapsed, "regressions": len(published.regressions), "regressed": regressed,
                      "page": str(published.page)}))  # fmt: skip


def main() -> None:
    if sys.argv[1:2] == ["--render-once"]:
        render_once(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="keep the store and reports here")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    work.mkdir(parents=True, exist_ok=True)
    store_path = work / "results.sqlite"
    setup_s = None
    last = _reusable(store_path, args.runs) if args.keep else None
    if last is None:
        store_path.unlink(missing_ok=True)
        start = time.perf_counter()
        last = build_store(store_path, args.runs, args.devices, args.frames)
        setup_s = round(time.perf_counter() - start, 1)
    cold, render, cpu = [], [], []
    for _ in range(args.repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, __file__, "--render-once", str(store_path), str(last), str(work / "reports")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        cold.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        result = json.loads(proc.stdout)
        render.append(result["render_s"])
    page = Path(result["page"])
    print(json.dumps({
        "runs": args.runs, "devices": args.devices, "frames_per_device": args.frames,
        "store_mb": round(store_path.stat().st_size / 1e6, 1), "setup_s": setup_s,
        "cold_s": [round(t, 2) for t in cold], "render_s": [round(t, 2) for t in render],
        "cpu_s": [round(t, 2) for t in cpu], "load_avg_1m": round(os.getloadavg()[0], 1),
        "render_s_median": round(statistics.median(render), 2), "cold_s_median": round(statistics.median(cold), 2),
        "goal_s": 5.0, "met": statistics.median(cold) < 5.0,
        "html_kb": round(page.stat().st_size / 1024, 1), "regressions": result["regressions"],
        "regressed": result["regressed"], "page": str(page),
    }))  # fmt: skip


def _reusable(store_path: Path, runs: int) -> int | None:
    """The last run id of a store this benchmark wrote before with `runs` runs, else None."""
    if not store_path.exists():
        return None
    with open_store(store_path) as store:
        rows = store.runs.latest()
    return rows[0].id if len(rows) == runs else None


if __name__ == "__main__":
    main()

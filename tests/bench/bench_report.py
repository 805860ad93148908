"""Benchmark: render a run's report from a results store holding 30 runs x 4 devices x 100k frames
(goal: under 5 s).

    python tests/bench/bench_report.py [--runs 30] [--devices 4] [--frames 100000] [--repeat 3] [--keep DIR]

Setup (not timed) writes the store through its API: every run gets its frame records, HDR histograms,
measurements and faults, like a replay run; run 1 is the baseline and the last run has a +25% latency
regression on one device. Timed: `publish_run` on the last run, i.e. loading it and the baseline from the
store (frames, histograms), every verdict, 30 runs of trends, plots, HTML and writing the files.
Prints one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.report.publish import publish_run  # noqa: E402
from bench.results.store import open_store  # noqa: E402
from tests.stored_runs import build_store  # noqa: E402


def main() -> None:
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
    store_path.unlink(missing_ok=True)
    start = time.perf_counter()
    last = build_store(store_path, args.runs, args.devices, args.frames)
    setup_s = time.perf_counter() - start
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        with open_store(store_path) as store:
            published = publish_run(store, last, reports_dir=work / "reports")
        times.append(time.perf_counter() - start)
    page = published.page
    print(json.dumps({
        "runs": args.runs, "devices": args.devices, "frames_per_device": args.frames,
        "store_mb": round(store_path.stat().st_size / 1e6, 1), "setup_s": round(setup_s, 1),
        "render_s_min": round(min(times), 3), "render_s_median": round(statistics.median(times), 3),
        "render_s_max": round(max(times), 3), "goal_s": 5.0, "met": max(times) < 5.0,
        "html_kb": round(page.stat().st_size / 1024, 1), "regressions": len(published.regressions),
        "regressed": sorted({v.device for v in published.regressions}), "page": str(page),
    }))  # fmt: skip


if __name__ == "__main__":
    main()

"""How long reports/index.html (the history page) takes for a year of nights, and what it looks like.

    .venv/bin/python -m tests.bench bench_history_page [--nights 365] [--out DIR] [--screenshot]

Writes a store of `--nights` nightly session runs on four devices (judged night by night by the nightly's
confirm stage; a +5% a night inference creep on orin-1 over the last 10 nights, a memory step on c6-a, a failed
night, a new model every 30 nights), a run-list entry per night, then times the history grid's read from the
store and the index's rendering (what every `hilbench report` and nightly does), and the full publish of the
newest night. With --screenshot, loads the index in headless Chromium and saves a PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.report.html import run_file_stem, write_index
from bench.report.nights import load_grids
from bench.report.publish import publish_run
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store
from tests.nightly_history import Plan, write_history
from tests.report_chromium import check_page

DEVICES = ("c6-a", "orin-1", "pi5-1", "switch-1")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nights", type=int, default=365)
    p.add_argument("--out", help="work folder (default: a temporary one, kept)")
    p.add_argument("--screenshot", action="store_true")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-history-"))
    out.mkdir(parents=True, exist_ok=True)
    rules = load_thresholds()
    n = args.nights
    plan = Plan(nights=n, creep_from=n - 10, step_night=n - 20, failed={n - 15: "switch-1"}, model_every=30)
    reports = out / "reports"
    (reports / "runs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open_store(out / "results.sqlite") as store:
        ids = write_history(store, rules, plan, DEVICES)
        for run_id in ids[:-1]:  # a run-list entry per night, as a rendered report leaves one
            entry = {"run": {"run_id": str(run_id), "started_at": store.runs.run(run_id).started_at, "label": "replay",
                             "status": "ok", "meta": {"session": "combat"}}, "baseline": {"name": None},
                     "outcome": {"verdict": "pass", "regressions": 0, "regressed_devices": []},
                     "devices": [{"name": d} for d in DEVICES]}  # fmt: skip
            (reports / "runs" / f"{run_file_stem(str(run_id))}.json").write_text(json.dumps(entry))
        seeded = time.monotonic() - started
        t0 = time.monotonic()
        grids = load_grids(store, rules)
        t1 = time.monotonic()
        index = write_index(reports, None, grids)
        t2 = time.monotonic()
        published = publish_run(store, ids[-1], reports_dir=reports, thresholds=rules)
        t3 = time.monotonic()
    print(f"{n} nights x {len(DEVICES)} devices stored and judged in {seeded:.1f} s (not timed below)")
    print(f"history grid from the store: {t1 - t0:.2f} s; index.html ({index.stat().st_size / 1e6:.2f} MB, "
          f"{n} runs listed): {t2 - t1:.2f} s; total {t2 - t0:.2f} s (goal < 3 s)")  # fmt: skip
    print(f"publish of the newest night (its report, latest.html, index.html): {t3 - t2:.2f} s, exit "
          f"{int(published.exit_code)}")  # fmt: skip
    for v in published.regressions:
        print(f"  {v.device} {v.reason.split(';')[0]}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.screenshot:
        png = out / "index.png"
        check = check_page(index, png, width=1500)
        print(f"headless Chromium: {len(check.errors)} errors, {len(check.requests)} requests; screenshot {png}")
    print(f"work folder: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

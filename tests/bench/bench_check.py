"""Benchmark of the pre-merge check (`hilbench check`) on the virtual fleet: a policy with twice the
multiply-accumulates must fail (exit 1, naming the metric) in under 5 minutes, and the unchanged model must pass
every time it is checked (goal: 5 in a row).

    .venv/bin/python -m tests.bench bench_check [--device pi5-1] [--session fixtures/sessions/combat.mcap]
                                                [--same 5] [--runs 3] [--out DIR] [--json]

Each check runs as a user runs it (`hilbench check --model ...`, its own results store and output folder under
--out); the 2x model is grown from the device's fixture policy as tests/bench/bench_verdicts.py grows its models.
Prints one line per check (exit code, seconds, the metrics it names, the host's load before and after) and then
each goal with the figure next to it. Timing on a shared host is noisy: the load is printed with every check."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_verdicts import ENERGY_GROWTH, grown_model, own_model

REPO = Path(__file__).resolve().parents[2]
GOAL_S = 300.0
NAMED = re.compile(r"^  (REGRESSION|INCONCLUSIVE) \S+ (\S+):", re.MULTILINE)


def load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def check(label: str, model: Path, args: argparse.Namespace, out: Path) -> dict:
    """One `hilbench check` of `model`: its exit code, seconds, named metrics and the load around it."""
    before, started = load(), time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "check", "--device", args.device, "--session", args.session, "--model",
         str(model), "--runs", str(args.runs), "--results", str(out / "results.sqlite"), "--output-dir",
         str(out / label), "--summary-md", str(out / f"{label}.md")],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"},
    )  # fmt: skip
    seconds = time.monotonic() - started
    named = [f"{status.lower()} {metric}" for status, metric in NAMED.findall(proc.stdout)]
    line = {"check": label, "exit": proc.returncode, "seconds": round(seconds, 1), "named": named,
            "load_before": before, "load_after": load()}  # fmt: skip
    (out / f"{label}.log").write_text(proc.stdout + proc.stderr)
    return line


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="pi5-1")
    p.add_argument("--session", default=str(REPO / "fixtures" / "sessions" / "combat.mcap"))
    p.add_argument("--same", type=int, default=5, help="checks of the unchanged model (goal: all pass)")
    p.add_argument("--runs", type=int, default=3, help="replays of each build per check")
    p.add_argument("--out", type=Path, default=None, help="where stores, logs and summaries go (default: a temp dir)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-check-"))
    out.mkdir(parents=True, exist_ok=True)
    own = own_model(args.device)
    name = own.removesuffix("-int8")
    doubled = out / f"{name}-macs2-int8.tflite"
    what = grown_model(own, ENERGY_GROWTH, doubled, f"{name}-macs2/v1")
    same = REPO / "fixtures" / "models" / f"{own}.tflite"
    lines = []
    for label, model in [("macs-x2", doubled)] + [(f"unchanged-{n}", same) for n in range(1, args.same + 1)]:
        lines.append(check(label, model, args, out))
        if not args.json:
            x = lines[-1]
            print(f"{x['check']:<12} exit {x['exit']}  {x['seconds']:6.1f} s  load {x['load_before']} -> "
                  f"{x['load_after']}  {', '.join(x['named']) or '-'}", flush=True)  # fmt: skip
    bad, good = lines[0], lines[1:]
    caught = bad["exit"] == 1 and any(n.startswith("regression") for n in bad["named"])
    passes = sum(x["exit"] == 0 for x in good)
    goals = {
        "macs_x2_caught": caught, "macs_x2_seconds": bad["seconds"], "macs_x2_under_goal": bad["seconds"] < GOAL_S,
        "unchanged_passed": passes, "unchanged_checked": len(good), "model": what, "out": str(out),
    }  # fmt: skip
    if args.json:
        print(json.dumps({"checks": lines, "goals": goals}, indent=2))
    else:
        print(
            f"2x MACs ({what}): {'caught' if caught else 'NOT caught'} ({', '.join(bad['named']) or 'nothing'}) "
            f"in {bad['seconds']:.0f} s (goal: exit 1 naming the metric, under {GOAL_S:.0f} s)"
        )
        print(f"unchanged model: {passes} of {len(good)} checks passed (goal: all, 5 in a row)")
        print(f"logs and summaries: {out}")
    return 0 if caught and passes == len(good) else 1


if __name__ == "__main__":
    raise SystemExit(main())

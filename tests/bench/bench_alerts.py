"""A scripted history of alerts, night by night: what a team sees from a step to its fix and back.

    .venv/bin/python tests/bench/bench_alerts.py [--out DIR] [--json]

Synthetic nights of session "combat" on c6-a and orin-1 (figures written through the results store, judged by the
nightly's own confirm stage, recorded as alerts by the nightly's own step; the exit code is the nightly's
NightlyResult.exit_code), and triage through the `hilbench alerts` CLI as a user types it:

1. six good nights (the baseline window), then c6-a gets model v2 (+40% inference time): one alert opens;
2. five more bad nights join it (still one alert, "known");
3. `hilbench alerts ack` keeps it out of the exit code (unless acknowledged alerts are set to fail the night);
4. model v3 brings the figure back: after `fixed_after_nights` nights the bench marks it fixed;
5. model v2 comes back on c6-a (a relapse): the same alert reopens, untriaged, and the night fails again;
6. orin-1 gets model v2 too: its alert names the c6-a alert as the same change, and
   `hilbench alerts downstream` marks it so (only the root fails the night).

Each step prints what happened next to what it should be, and the script exits 1 if any step is not met.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import benchpath  # noqa: F401  (first: the checkout and the agents' folders on sys.path)
import numpy as np

from bench.alerts import night_alerts, table
from bench.nightly.publish import PublishedRun
from bench.nightly.run import NightlyResult
from bench.results.evidence import stored_verdicts
from bench.results.thresholds import load_thresholds
from bench.store.results import ResultStore, open_store
from tests.conftest import REPO, hilbench
from tests.nightly_history import store_night

RULES = load_thresholds()
V1, V2, V3 = "1" * 64, "2" * 64, "3" * 64  # model sha256s: v2 has the step, v3 fixes it
STEP = 1.4  # v2's inference time factor


class Script:
    """The history being written, and what each step found."""

    def __init__(self, store: ResultStore, path: Path) -> None:
        self.store, self.path = store, path
        self.rng = np.random.default_rng(40)
        self.night = 0
        self.checks: list[tuple[str, bool, str]] = []

    def run(self, c6: str, orin: str = V1, note: str = "") -> int:
        """One night; prints its line: night, run, models, what happened to alerts, exit code."""
        slower = {name: STEP for name, model in (("c6-a", c6), ("orin-1", orin)) if model == V2}
        run = store_night(self.store, RULES, self.rng, slower=slower, models={"c6-a": c6, "orin-1": orin})
        self.night += 1
        alerts = night_alerts(self.store, [run], RULES.alerts)
        words = [f"new #{a.id} {a.device}" for a in alerts.new] + [f"known #{a.id} {a.state}" for a in alerts.known]
        words += [f"fixed #{a.id}" for a in alerts.fixed]
        print(f"night {self.night:>2} run {run:>3}  c6-a {_v(c6)} orin-1 {_v(orin)}  exit {self.exit(run)}  "
              f"{', '.join(words) or '-'}{'  ' + note if note else ''}")  # fmt: skip
        return run

    def exit(self, run: int, fail_acknowledged: bool = False) -> int:
        """The nightly's exit code for the night of run `run`, with its alerts as stored now."""
        result = NightlyResult(f"night-{run}", self.path.parent, [])
        result.runs = [PublishedRun("combat", run, "window", None, stored_verdicts(self.store, run))]
        rules = replace(RULES.alerts, fail_acknowledged=fail_acknowledged)
        result.alerts = night_alerts(self.store, [run], rules)
        return int(result.exit_code)

    def cli(self, *args: str) -> str:
        """`hilbench alerts ARGS --results STORE`, printed as typed, with its output."""
        done = subprocess.run(hilbench("alerts", *args, "--results", str(self.path)), cwd=REPO, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})  # fmt: skip
        print(f"$ hilbench alerts {shlex.join(args)}")
        print("".join(f"  {line}\n" for line in (done.stdout + done.stderr).splitlines()), end="")
        return done.stdout

    def check(self, what: str, ok: bool, seen: str) -> None:
        self.checks.append((what, ok, seen))
        print(f"  -> {'met' if ok else 'NOT MET'}: {what} ({seen})")


def _v(sha: str) -> str:
    return {V1: "v1", V2: "v2", V3: "v3"}[sha]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="work folder (default: a temporary one, kept)")
    p.add_argument("--json", action="store_true", help="also print the checks as JSON")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-alerts-"))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.sqlite"
    path.unlink(missing_ok=True)
    k = RULES.alerts.fixed_after_nights
    print(f"store {path}; [alerts] fixed_after_nights = {k}, reopen_nights = {RULES.alerts.reopen_nights}")
    with open_store(path) as store:
        s = Script(store, path)
        for _ in range(6):
            s.run(V1)
        print("1. a step opens one alert")
        first = s.run(V2, note="<- model v2 on c6-a")
        (opened,) = night_alerts(store, [first], RULES.alerts).new
        s.check("a step opens one alert, and the night fails", s.exit(first) == 1, f"alert #{opened.id}, exit 1")
        s.cli("show", str(opened.id))
        print("2. five more bad nights join it")
        bad = [s.run(V2) for _ in range(5)]
        known = night_alerts(store, [bad[-1]], RULES.alerts).known
        total = len(table.select(store, states=None))
        joined = total == 1 and [a.id for a in known] == [opened.id]
        seen = f"{total} alert(s); night {s.night} known #{known[0].id if known else '-'}"
        s.check("5 more bad nights join it (one alert in the store)", joined, seen)
        print("3. ack keeps it out of the new-alerts exit code")
        before = s.exit(bad[-1])
        s.cli("ack", str(opened.id), "--owner", "maria", "--note", "v2 is heavier; v3 coming", "--link",
              "https://bugs.example/41")  # fmt: skip
        after, strict = s.exit(bad[-1]), s.exit(bad[-1], fail_acknowledged=True)
        more = s.run(V2)
        s.check(
            "ack keeps it out of the exit code",
            (before, after, s.exit(more)) == (1, 0, 0),
            f"night {s.night - 1}: exit {before} before the ack, {after} after; next bad night exit {s.exit(more)}",
        )
        s.check("--fail-acknowledged still fails the night", strict == 1, f"exit {strict}")  # fmt: skip
        print(f"4. a fixed model closes it after {k} nights")
        fixed = [s.run(V3, note="<- model v3" if i == 0 else "") for i in range(k)]
        state = table.get(store, opened.id)
        closed = state.state == "fixed" and state.fixed_run == fixed[-1]
        s.check(
            f"a later fixed model closes it after {k} nights",
            closed,
            f"#{opened.id} {state.state} by run {state.fixed_run}",
        )
        s.run(V3)
        print("5. a relapse reopens it")
        relapse = s.run(V2, note="<- model v2 again")
        again = night_alerts(store, [relapse], RULES.alerts).new
        s.check(
            "a relapse reopens it (the same alert, untriaged, the night fails)",
            [(a.id, a.state) for a in again] == [(opened.id, "untriaged")] and s.exit(relapse) == 1,
            f"new #{again[0].id if again else '-'} {again[0].state if again else ''}, exit {s.exit(relapse)}",
        )
        s.cli("ack", str(opened.id), "--owner", "maria", "--note", "v2 is back in the fleet file; reverting")
        print("6. a second device's step on the same model is marked downstream")
        second = s.run(V2, V2, note="<- model v2 on orin-1 too")
        (other,) = night_alerts(store, [second], RULES.alerts).new
        listed = s.cli("list")
        s.check(
            "the bench suggests it is downstream",
            other.suggested_of == opened.id and "same change as #" in listed,
            f"#{other.id} on {other.device}: same change as #{other.suggested_of}",
        )
        s.cli("downstream", str(other.id), "--of", str(opened.id))
        marked = table.get(store, other.id)
        down = (marked.state, marked.of_alert) == ("downstream", opened.id) and s.exit(second) == 0
        seen = f"#{other.id} {marked.state} of #{marked.of_alert}; exit {s.exit(second)} (root acknowledged)"
        s.check("a second device's step on the same model is marked downstream", down, seen)
        s.cli("list", "--all")
    met = all(ok for _, ok, _ in s.checks)
    print(f"{sum(ok for _, ok, _ in s.checks)} of {len(s.checks)} steps met; store {path}")
    if args.json:
        print(json.dumps([{"step": w, "met": ok, "seen": seen} for w, ok, seen in s.checks], indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""A scripted history of alerts, night by night: what a team sees from a step to its fix and back.

    .venv/bin/python -m tests.bench bench_alerts [--out DIR] [--json]

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

With --model-step DEVICE it runs reduced nightlies (`hilbench nightly --session combat.mcap --device DEVICE`, update
and fault stages skipped) on the bundled virtual fleet as it is (pi5-1: the Pi 5 guest under QEMU -icount, its PMIC
meter) from this checkout: `baseline_runs` unchanged nights, then a model with twice the multiply-accumulates
(`--model`, grown from the fixture policy as bench_verdicts.py grows it) two nights in a row, acknowledged after the
first. Goals (issue 51): the first model night opens ONE alert, listing every metric the night's verdicts found
regressed on the device; after one `hilbench alerts ack` the next night with the same model exits 0, its alert
known and acknowledged, no new one. About 1.5 minutes a night on the 2-core host when nothing else runs.

With --real DEVICES it runs real nightlies instead (`hilbench nightly` on the bundled virtual fleet with its Linux
boards as loopback stand-ins, update and fault stages skipped, from a scratch copy of the checkout, as
tests/bench/bench_verdicts.py does): six unchanged nights, then the agents hold ~13% more memory (a new agent
bundle) for three nights, acknowledged after the first two, then the agents as they were for
`fixed_after_nights` nights. Each night prints its exit code and alerts; `hilbench alerts show` prints the
alert as a real nightly filled it in (the fingerprint change, the attribution, the bisect command).
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

import numpy as np

from bench.alerts import table
from bench.alerts.night import night_alerts
from bench.nightly.orchestration import NightlyResult
from bench.nightly.publish import PublishedRun
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


def real_history(out: Path, devices: list[str], duration: float) -> list[tuple[str, bool, str]]:
    """Real nightlies on the virtual fleet: a memory step that opens an alert, is acknowledged and is fixed."""
    import bench_verdicts as bv  # its scratch copy, fleet, night and injection helpers

    repo = bv.scratch_copy(out)
    os.environ.setdefault("HILBENCH_LEASE_DIR", str(out / "leases"))
    os.environ["HILBENCH_STATE_DIR"] = str(out / "state")
    synth = bv.hilbench(repo, "session", "synth", "--scenario", "combat", "--duration", str(duration),
                        "--out", str(out / "sessions"))  # fmt: skip
    if synth.returncode:
        raise SystemExit(synth.stderr)
    (session,) = (out / "sessions").glob("*.mcap")
    store, reports, fleet = out / "results.sqlite", out / "reports", bv.realtime_fleet(repo)
    checks: list[tuple[str, bool, str]] = []

    def night(label: str) -> tuple[dict, list]:
        result = bv.night(repo, label, devices, session, store, reports, fleet)
        with open_store(store) as db:
            found = night_alerts(db, [result["run"]], RULES.alerts)
        words = [f"new #{a.id} {a.device} {a.title}" for a in found.new]
        words += [f"known #{a.id} {a.state}" for a in found.known] + [f"fixed #{a.id}" for a in found.fixed]
        print(f"{label:<14} run {result['run']:>3} exit {result['exit']} ({result['seconds']:.0f} s)  "
              f"{', '.join(words) or '-'}", flush=True)  # fmt: skip
        return result, [*found.new, *found.known, *found.fixed]

    def cli(*args: str) -> None:
        done = bv.hilbench(repo, "alerts", *args, "--results", str(store))
        lines = (done.stdout + done.stderr).splitlines()
        print(f"$ hilbench alerts {shlex.join(args)}\n" + "".join(f"  {x}\n" for x in lines), end="")

    for k in range(1, 7):
        night(f"unchanged-{k}")
    originals = {name: (repo / name).read_text() for name in (bv.HOST_AGENT, bv.MPY_AGENT)}
    print("injected:", bv.inject_memory(repo, store, devices))
    first, opened = night("memory+13%")
    ids = sorted({a.id for a in opened})
    checks.append(("a real step opens an alert per device and metric, and the night fails",
                   bool(ids) and first["exit"] == 1, f"alerts {ids}, exit {first['exit']}"))  # fmt: skip
    for i in ids:
        cli("show", str(i))
    second, joined = night("memory+13% (2)")
    checks.append(("the next night joins them", sorted({a.id for a in joined}) == ids and second["exit"] == 1,
                   f"alerts {sorted({a.id for a in joined})}, exit {second['exit']}"))  # fmt: skip
    for i in ids:
        cli("ack", str(i), "--owner", "maria", "--note", "agent ballast; reverting")
    third, _ = night("memory+13% (3)")
    checks.append(("acknowledged, the night passes", third["exit"] == 0, f"exit {third['exit']}"))
    for name, text in originals.items():
        (repo / name).write_text(text)
    for k in range(1, RULES.alerts.fixed_after_nights + 1):
        night(f"reverted-{k}")
    with open_store(store) as db:
        states = {i: table.get(db, i).state for i in ids}
    checks.append((f"fixed after {RULES.alerts.fixed_after_nights} nights", set(states.values()) == {"fixed"},
                   str(states)))  # fmt: skip
    cli("list", "--all")
    for what, ok, seen in checks:
        print(f"  -> {'met' if ok else 'NOT MET'}: {what} ({seen})")
    return checks


def model_step(out: Path, device: str, session: Path) -> list[tuple[str, bool, str]]:
    """Reduced nightlies on `device`: an unchanged baseline, then a 2x-MAC model on two nights, acknowledged between
    them (module docstring)."""
    import bench_verdicts as bv

    store, reports = out / "results.sqlite", out / "reports"
    own = bv.own_model(device)
    name = own.removesuffix("-int8")
    doubled = out / f"{name}-macs2-int8.tflite"
    print("model:", bv.grown_model(own, bv.ENERGY_GROWTH, doubled, f"{name}-macs2/v1"), flush=True)
    checks: list[tuple[str, bool, str]] = []

    def night(label: str, model: Path | None = None) -> tuple[dict, dict]:
        result = bv.night(REPO, label, [device], session, store, reports, model=model)
        with open_store(store) as db:
            found = night_alerts(db, [result["run"]], RULES.alerts).to_json()
        print(f"{label:<12} run {result['run']:>3} exit {result['exit']} ({result['seconds']:.0f} s, load "
              f"{os.getloadavg()[0]:.1f})  regressions: {', '.join(result['regressions']) or '-'}; alerts: "
              f"{', '.join(bv.night_alert_words(found)) or '-'}", flush=True)  # fmt: skip
        return result, found

    def cli(*args: str) -> str:
        done = bv.hilbench(REPO, "alerts", *args, "--results", str(store))
        lines = (done.stdout + done.stderr).splitlines()
        print(f"$ hilbench alerts {shlex.join(args)}\n" + "".join(f"  {x}\n" for x in lines), end="", flush=True)
        return done.stdout

    for k in range(1, RULES.baseline_runs + 1):
        night(f"unchanged-{k}")
    first, found = night("2x MACs", doubled)
    moved = sorted(r.split(":", 1)[1] for r in first["regressions"] if r.startswith(f"{device}:"))
    opened = found.get("new", [])
    listed = sorted(m["metric"] for a in opened for m in a["metrics"])
    checks.append((f"the 2x-MAC model opens one alert on {device} listing every metric it moved, the night fails",
                   len(opened) == 1 and bool(moved) and listed == moved and first["exit"] == 1,
                   f"{len(opened)} alert(s) listing {listed}; regressions {moved}; exit {first['exit']}"))  # fmt: skip
    if not opened:
        return checks
    alert_id = str(opened[0]["id"])
    cli("list")
    cli("show", alert_id)
    cli("ack", alert_id, "--owner", "maria", "--note", "twice the MACs; a smaller model is coming")
    second, again = night("2x MACs (2)", doubled)
    known = [(a["id"], a["state"]) for a in again.get("known", [])]
    checks.append(("one ack keeps the next night with the same model from failing",
                   second["exit"] == 0 and again.get("new") == [] and known == [(int(alert_id), "acknowledged")],
                   f"exit {second['exit']}; new {[a['id'] for a in again.get('new', [])]}, known {known}"))  # fmt: skip
    cli("list", "--all")
    for what, ok, seen in checks:
        print(f"  -> {'met' if ok else 'NOT MET'}: {what} ({seen})", flush=True)
    return checks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="work folder (default: a temporary one, kept)")
    p.add_argument("--json", action="store_true", help="also print the checks as JSON")
    p.add_argument("--real", metavar="DEVICES", help="real nightlies on these virtual devices (e.g. pi5-1,c6-a)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds of the synthetic session (--real)")
    p.add_argument("--model-step", metavar="DEVICE", help="reduced nightlies on DEVICE: a 2x-MAC model, one ack")
    p.add_argument("--session", type=Path, default=REPO / "fixtures" / "sessions" / "combat.mcap",
                   help="the session of --model-step's nightlies")  # fmt: skip
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-alerts-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.real or args.model_step:
        if args.model_step:
            checks = model_step(out, args.model_step, args.session)
        else:
            checks = real_history(out, args.real.split(","), args.duration)
        if args.json:
            print(json.dumps([{"step": w, "met": ok, "seen": seen} for w, ok, seen in checks], indent=2))
        return 0 if all(ok for _, ok, _ in checks) else 1
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

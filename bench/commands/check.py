"""`hilbench check`: the pre-merge check. A candidate build (a model, a firmware image, or one built from a git
ref) against the fleet's own build on the chosen devices, k replays each, interleaved in one job and judged by the
nightly's rules; its exit code gates a merge (0 pass, 1 regression, 2 usage, 3 bench infrastructure)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from bench.bundles import trust
from bench.ci.write import write_ci_files
from bench.commands import (
    add_ci_run_options,
    add_fleet_options,
    add_verdict_options,
    ci_files,
    held_devices,
    results_at,
    selected_devices,
)
from bench.commands.nightly import change_under_test, distinct_sessions
from bench.commands.replay import parse_speed
from bench.commands.values import int_in, seconds
from bench.config.fleet import Device
from bench.core.console import compact_table, emit_json, err, out
from bench.core.errors import ConfigError
from bench.core.stopping import run_stoppable
from bench.core.units import figure
from bench.models import guess_name_and_format
from bench.models.shape import check_model
from bench.premerge.ci_report import check_report
from bench.premerge.git_build import build_commit, resolve_commit
from bench.premerge.interleave import CheckOptions, CheckResult, run_check
from bench.premerge.plan import Estimate, order, switches
from bench.replay.recording import read_session
from bench.results.thresholds import load_thresholds
from bench.results.verdict import COLLECTING, INCONCLUSIVE, MIN_WINDOW_RUNS, UNCHANGED
from bench.store.results import open_store

DEFAULT_RUNS = 3
DEFAULT_REPLAY_S = 12.0  # bench seconds of each replay on a guest replayed on its own clock (its replay_budget_s)
DEFAULT_BUDGET_S = 300.0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `check` command."""
    p = sub.add_parser(
        "check", help="pre-merge check: a candidate build against the fleet's own (exit 1 on regression)"
    )
    add_fleet_options(p, results="results store (its nightly baselines are never touched)")
    p.add_argument("--session", action="append", required=True, metavar="FILE", help="session file to replay")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--model", metavar="FILE", help="candidate .tflite (converted to .npcm for MicroPython boards)")
    what.add_argument("--firmware", metavar="FILE", help="candidate firmware image for the ESP32-C6 boards")
    what.add_argument("--git", metavar="REF", help="candidate built from commit REF of --repo by --build CMD")
    p.add_argument("--build", metavar="CMD", help="with --git: shell command writing one artefact into "
                   "$HILBENCH_BUILD_OUT (a .tflite or a .bin)")  # fmt: skip
    p.add_argument("--repo", default=".", metavar="DIR", help="with --git: the repository (default: .)")
    p.add_argument("--runs", type=int_in(MIN_WINDOW_RUNS, 20), default=DEFAULT_RUNS,
                   help=f"replays of each build, at least {MIN_WINDOW_RUNS}: one has no run-to-run spread "
                   f"(default {DEFAULT_RUNS})")  # fmt: skip
    p.add_argument("--replay-s", type=seconds, default=DEFAULT_REPLAY_S, metavar="S",
                   help="bench seconds of each replay on a guest replayed on its own clock "
                   f"(default {DEFAULT_REPLAY_S:g}; 0: the device's replay_budget_s)")  # fmt: skip
    p.add_argument(
        "--budget",
        type=seconds,
        default=DEFAULT_BUDGET_S,
        metavar="S",
        help=f"the time the check should take; a plan over it is refused (default {DEFAULT_BUDGET_S:g})",
    )
    add_verdict_options(p)
    add_ci_run_options(p)
    p.set_defaults(func=cmd_check)


def candidate(
    args: argparse.Namespace, devices: list[Device], work: Path
) -> tuple[Callable[[Device], Device] | None, str]:
    """How a device runs the candidate (None: the fleet's own build against itself) and its name; every file is
    checked (and a git ref built) before any device is touched: a ConfigError names what is wrong."""
    if args.build and not args.git:
        raise ConfigError("--build needs --git REF (the commit to build)")
    model, firmware = args.model, args.firmware
    if args.git:
        if not args.build:
            raise ConfigError("--git needs --build CMD (the command that writes the artefact)")
        built = build_commit(args.repo, resolve_commit(args.repo, args.git), args.build, work / "builds")
        model, firmware = (str(built), None) if built.suffix == ".tflite" else (None, str(built))
    if model is None and firmware is None:
        return None, "the fleet's own build"
    if model is not None:
        if not Path(model).is_file():
            raise ConfigError(f"--model {model}: no such file", file=model)
        check_model(Path(model), guess_name_and_format(Path(model))[1])  # parsed and shape-checked, as publish does
    if firmware is not None and not Path(firmware).is_file():
        raise ConfigError(f"--firmware {firmware}: no such file", file=firmware)
    settings = {d.name: d.settings for d in change_under_test(devices, model, firmware)}
    name = (
        f"git {args.git}" if args.git else f"model {Path(model).name}" if model else f"firmware {Path(firmware).name}"
    )
    return (lambda d: replace(d, settings=settings[d.name])), name


def estimate(devices: list[Device], sessions: list[Path], runs: int, replay_s: float, same: bool) -> Estimate:
    """What the check should take: each replay as long as its longest device's (a guest's replay budget, else the
    session's length)."""
    longest = 0.0
    for path in sessions:
        length = read_session(path, values=False).duration_s
        for d in devices:
            guest = d.settings.replay_budget_s
            longest = max(longest, (replay_s or guest) if guest else length)
    sides = order(runs)
    return Estimate(len(sides) * len(sessions), longest, switches(sides, same))


def cmd_check(args: argparse.Namespace) -> int:
    """Run the check; print the verdicts and where the time went (or JSON); exit 0 pass, 1 regression."""
    fleet, devices = selected_devices(args)
    if not devices:
        raise ConfigError("no device matches the selection", hint="see `hilbench fleet list`")
    sessions = distinct_sessions([Path(s) for s in args.session])  # each read; two with one id refused
    files = ci_files(args)
    speed = parse_speed(args.speed)
    thresholds = load_thresholds(args.thresholds)
    if args.replay_s:
        devices = [d.with_settings(replay_budget_s=args.replay_s) if d.settings.replay_budget_s else d for d in devices]
    work = args.output_dir / f"check-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    work.mkdir(parents=True, exist_ok=True)
    change, name = candidate(args, devices, work)
    plan = estimate(devices, sessions, args.runs, args.replay_s, change is None)
    if plan.seconds > args.budget:
        raise ConfigError(f"the check would take {plan.line()}, over --budget {args.budget:g} s",
                          hint="fewer --runs, a shorter session, --replay-s, or a larger --budget")  # fmt: skip
    err.print(f"check {name} on {', '.join(d.name for d in devices)}: {plan.line()}", highlight=False)
    trust.check(devices)
    store = open_store(results_at(args, fleet))
    opts = CheckOptions(devices, change, name, sessions, store, work, thresholds, args.runs, speed,
                        fleet.bench.name)  # fmt: skip
    started = dt.datetime.now().astimezone()
    try:
        with held_devices(devices, "check", args.lease_wait):
            result = run_stoppable(_run(opts, args.json))
        report = check_report(result, store, thresholds, started, work)
        write_ci_files(report, files)
    finally:
        store.close()
    if args.json:
        emit_json({**result.to_json(), "exit_code": result.exit_code, "logs": str(work)})
    else:
        _print(result)
    return result.exit_code


async def _run(opts: CheckOptions, quiet: bool) -> CheckResult:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=quiet, transient=True) as bars:
        task = bars.add_task(f"checking {opts.candidate_name}")
        return await run_check(opts, lambda message: bars.update(task, description=message))


def _print(result: CheckResult) -> None:
    """The verdicts that moved (or that nothing did), each device's outcome, and where the time went."""
    for session in result.sessions:
        table = compact_table(f"{session.session}: {result.candidate} vs the fleet's build, "
                              f"{result.runs_per_build} replays each")  # fmt: skip
        for col in ("device", "metric", "candidate", "baseline", "change", "verdict"):
            table.add_column(col, no_wrap=col in ("device", "change"))
        for v in session.verdicts:
            if v.status in (UNCHANGED, COLLECTING) and v.run_value is None:
                continue
            change = "-" if v.effect_pct is None else f"{v.effect_pct:+.1f}%"
            colour = {"regression": "red", "inconclusive": "yellow"}.get(v.status, "")
            verdict = f"[{colour}]{v.status}[/{colour}]" if colour else v.status
            table.add_row(v.device, v.title, figure(v.run_value, v.unit), figure(v.baseline_value, v.unit), change,
                          verdict)  # fmt: skip
        out.print(table)
        for v in session.verdicts:
            if v.status in ("regression", "inconclusive"):
                out.print(f"  {v.status.upper()} {v.device} {v.metric}: {v.reason}", highlight=False)
    for device, outcome in sorted(result.device_outcomes().items()):
        if outcome.cls != "pass":
            out.print(f"{device}: {outcome.label}", highlight=False)
    timing = compact_table("where the time went")
    timing.add_column("step")
    timing.add_column("seconds", justify="right")
    for what, secs in result.timings:
        timing.add_row(what, f"{secs:.1f}")
    timing.add_row("total", f"{sum(s for _, s in result.timings):.1f}")
    out.print(timing)
    words = {0: "pass", 1: "REGRESSION (or the candidate failed)", 3: "the bench failed"}
    busy = sorted({f"{v.device} {v.metric}" for v in result.verdicts if v.status == INCONCLUSIVE})
    tail = f" (inconclusive: {', '.join(busy)}; re-run on a quieter host)" if busy and result.exit_code == 0 else ""
    out.print(f"exit {result.exit_code}: {words.get(result.exit_code, '')}{tail}", highlight=False)

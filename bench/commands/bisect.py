"""`hilbench bisect`: the first bad build of an ordered series (models or firmware images), or of a git range
built by a command, on one leased device, each step replayed k times and judged by the nightly's rules."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import shlex
from collections.abc import Callable
from pathlib import Path

from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from bench.bundles import reset_model, trust
from bench.ci import facts as ci
from bench.ci.write import write_ci_files
from bench.commands import (
    add_ci_run_options,
    add_fleet_options,
    add_verdict_options,
    ci_files,
    held_devices,
    selected_devices,
)
from bench.commands.nightly import change_under_test
from bench.commands.replay import parse_speed
from bench.commands.values import int_in
from bench.config.fleet import Device
from bench.core.console import emit_json, err, out
from bench.core.errors import BenchError, ConfigError, ExitCode
from bench.core.stopping import run_stoppable
from bench.core.units import figure
from bench.lab.acquire import reachable_devices
from bench.nightly.flashing import flash_devices
from bench.nightly.orchestration import model_mismatch, recorded_replay
from bench.premerge.git_build import BUILD_OUT_ENV, FIRMWARE_SUFFIXES, MODEL_SUFFIXES, build_commit, git_commits
from bench.replay.recording import read_session
from bench.results.bisect import BAD, DEFAULT_RUNS, SKIPPED, Bisection, NotRun, bisect
from bench.results.thresholds import load_thresholds
from bench.store.results import ResultStore, open_store
from bench.virtual import board_controls


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `bisect` command."""
    p = sub.add_parser("bisect", help="find the first bad build of a series (models, firmware, git commits)")
    add_fleet_options(p)
    p.add_argument("--session", required=True, metavar="FILE", help="session file to replay at each step")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--series", metavar="DIR", help="folder of builds (*.tflite or *.bin), oldest first by name")
    src.add_argument("--git", metavar="GOOD..BAD", help="commit range of the repo in --repo, built with --build")
    p.add_argument(
        "--build", metavar="CMD", help=f"with --git: shell command writing one artefact into ${BUILD_OUT_ENV}"
    )
    p.add_argument("--repo", default=".", metavar="DIR", help="with --git: the repository (default: .)")
    p.add_argument("--good", metavar="NAME", help="the known good build (default: the first)")
    p.add_argument("--bad", metavar="NAME", help="the known bad build (default: the last)")
    p.add_argument("--runs", type=int_in(1, 50), default=DEFAULT_RUNS, help="replays per step (default 3)")
    p.add_argument("--metric", metavar="NAME", help="judge only this metric (default: any judged metric)")
    add_verdict_options(p)
    add_ci_run_options(p, "--reports")
    p.set_defaults(func=cmd_bisect)


def series_builds(folder: str) -> list[Path]:
    """The builds of --series DIR in name order (ConfigError when there are fewer than two)."""
    path = Path(folder)
    if not path.is_dir():
        raise ConfigError(f"--series {folder}: not a folder")
    builds = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in MODEL_SUFFIXES + FIRMWARE_SUFFIXES)
    if len(builds) < 2:
        raise ConfigError(f"--series {folder}: needs at least two builds (*.tflite models or *.bin firmware images)")
    return builds


def _index(names: list[str], wanted: str | None, option: str, default: int) -> int:
    if wanted is None:
        return default
    matches = [i for i, n in enumerate(names) if n == wanted or n.startswith(wanted)]
    if len(matches) != 1:
        raise ConfigError(f"{option} {wanted}: {'no' if not matches else 'more than one'} build of that name",
                          hint=f"builds: {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}")  # fmt: skip
    return matches[0]


def with_artefact(device: Device, path: Path) -> Device:
    """The device set to run `path` (a model, converted for MicroPython boards, or a firmware image): the same
    check the nightly's --model / --firmware make; a ConfigError naming the file when it does not fit. Its deploy
    resets the model the agent runs to the deployed one (as the nightly's does): a board otherwise boots into the
    model it last switched to (docs/ota.md), and the step would measure that one."""
    if path.suffix in MODEL_SUFFIXES:
        return reset_model(change_under_test([device], str(path), None))[0]
    return reset_model(change_under_test([device], None, str(path)))[0]


def cmd_bisect(args: argparse.Namespace) -> int:
    """Bisect on one device; print the first bad build with its figure and the good one before it (or JSON)."""
    fleet, devices = selected_devices(args)
    if len(devices) != 1:
        raise ConfigError(f"bisect runs on one device; the selection has {len(devices)}", hint="use --device NAME")
    read_session(args.session, values=False)  # a bad file is reported before any device is touched
    files = ci_files(args)
    speed = parse_speed(args.speed)
    thresholds = load_thresholds(args.thresholds)
    if args.metric and args.metric not in {r.name for r in thresholds.rules}:
        raise ConfigError(f"--metric {args.metric}: not a metric of the thresholds",
                          hint=f"one of {', '.join(r.name for r in thresholds.rules)}")  # fmt: skip
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = args.output_dir / f"bisect-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    if args.series:
        paths: list[Path | None] = list(series_builds(args.series))
        names = [p.name for p in paths if p is not None]
        commits: list[str] = []
    else:
        if not args.build:
            raise ConfigError("--git needs --build CMD (the command that writes the artefact)")
        commits = git_commits(args.repo, args.git)
        names, paths = [c[:12] for c in commits], [None] * len(commits)
    good = _index(names, args.good, "--good", 0)
    bad = _index(names, args.bad, "--bad", len(names) - 1)
    if good >= bad:
        raise ConfigError(f"--good {names[good]} must come before --bad {names[bad]} in the series")
    trust.check(devices)
    store = open_store(work / "bisect.sqlite")

    def artefact(index: int) -> Path:
        if paths[index] is None:
            paths[index] = build_commit(args.repo, commits[index], args.build, work / "builds")
        return paths[index]

    with held_devices(devices, "bisect", args.lease_wait):  # one lease for every step
        bench = fleet.bench.name
        started = dt.datetime.now().astimezone()
        result = run_stoppable(
            _run(devices[0], names, artefact, store, speed, work, thresholds, args, good, bad, bench)
        )
    write_ci_files(bisect_report(result, store, started, work), files)
    store.close()
    if args.json:
        emit_json({**result.to_json(), "store": str(work / "bisect.sqlite"), "command": _command(args)})
    else:
        for line in summary_lines(result):
            out.print(line, highlight=False)
        out.print(f"steps and runs: {work / 'bisect.sqlite'}", highlight=False)
    return ExitCode.OK


async def _run(device, names, artefact: Callable[[int], Path], store, speed, work: Path, thresholds, args,
               good: int, bad: int, bench: str) -> Bisection:  # fmt: skip
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    async with reachable_devices([device]) as (resolved, running):
        base = resolved[0]
        current: dict[str, Device] = {}

        async def deploy(index: int) -> None:
            target = with_artefact(base, await asyncio.to_thread(artefact, index))
            (flashed,) = await flash_devices([target], work / "logs", lambda d: lambda *a: None,
                                             firmware=None, boards=board_controls(running))  # fmt: skip
            if not flashed.ok:
                raise BenchError(flashed.outcome.label)
            current["device"] = target

        async def replay(index: int, kind: str) -> int:
            target = current["device"]
            done = await recorded_replay([target], Path(args.session), store, work / "logs", speed=speed,
                                         bench=bench, kind=kind)  # fmt: skip
            wrong = model_mismatch(store, done.run_id, target)
            if wrong:  # a refused model: the one before it ran, so the figures are not this build's
                raise NotRun(f"{target.name} {wrong} (refused? its agent log is in {work / 'logs'})")
            return done.run_id

        with Progress(*columns, console=err, disable=args.json, transient=True) as bars:
            task = bars.add_task(f"bisecting {len(names)} builds on {device.name}")

            def show(message: str) -> None:
                bars.update(task, description=f"{device.name}: {message}")

            return await bisect(store, device.name, names, deploy, replay, thresholds, good=good, bad=bad,
                                runs=args.runs, metric=args.metric, progress=show)  # fmt: skip


def bisect_report(result: Bisection, store: ResultStore, started: dt.datetime, work: Path) -> ci.CiReport:
    """What the bisection's summary, JUnit and metrics files say: a case per step (failed when bad, skipped with
    the reason), each step's median figures labelled with its build, and every step's line."""
    lines = summary_lines(result)
    steps = ([result.baseline] if result.baseline else []) + result.steps
    figures = [
        f for s in steps for f in ci.median_figures(f for r in s.runs for f in ci.run_figures(store, r, build=s.build))
    ]
    status = {BAD: ci.FAILED, SKIPPED: ci.SKIPPED}
    cases = [ci.Case(f"hilbench bisect: {result.device}", f"bisect.{result.device}", s.build,
                     status.get(s.status, ci.PASSED), s.reason) for s in steps]  # fmt: skip
    return ci.CiReport(job="bisect", title=f"hilbench bisect on {result.device}", exit_code=int(ExitCode.OK),
                    headline=lines[0], figures=figures, cases=cases, notes=[*lines[1:], f"steps and runs: {work}"],
                    started=started)  # fmt: skip


def summary_lines(result: Bisection) -> list[str]:
    """The first bad build, its figure, and the good one before it; then every step."""
    steps = {s.index: s for s in result.steps}
    if result.baseline is not None:
        steps.setdefault(result.baseline.index, result.baseline)
    bad = steps.get(result.first_bad) if result.first_bad is not None else None
    good = steps.get(result.last_good) if result.last_good is not None else None
    metric = bad.metric if bad is not None and bad.metric else ""
    lines = []
    if bad is not None and bad.status == "bad":
        lines.append(f"first bad build: {bad.build} ({_fig(bad, metric)}); the good one before it: "
                     f"{good.build if good else '?'} ({_fig(good, metric)})")  # fmt: skip
        lines.append(f"  {bad.reason}")
    else:
        lines.append("no bad build found: " + (result.note or "every build tested was good"))
    if result.note and bad is not None and bad.status == "bad":
        lines.append(f"  note: {result.note}")
    tested = [s for s in result.steps if s.status != "skipped"]
    lines.append(f"{len(result.steps)} step(s) of {result.runs_per_step} replay(s) each ({len(tested)} judged), "
                 f"after {result.runs_per_step} replay(s) of the good end {result.builds[result.good]}:")  # fmt: skip
    for s in result.steps:
        lines.append(f"  {s.build}: {s.status}" + (f" ({_fig(s, metric)})" if s.status != "skipped" else "")
                     + (f": {s.reason}" if s.status == "skipped" else ""))  # fmt: skip
    return lines


def _fig(step, metric: str) -> str:
    found = step.figure(metric) if step is not None and metric else None
    return f"{metric} {figure(found[0], found[1])}" if found else "no figure"


def _command(args: argparse.Namespace) -> str:
    return shlex.join(
        [
            "hilbench",
            "bisect",
            "--session",
            args.session,
            *(["--series", args.series] if args.series else ["--git", args.git, "--build", args.build]),
        ]
    )

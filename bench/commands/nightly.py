"""`hilbench nightly`: the whole HIL regression run on a fleet (default: the bundled virtual fleet)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.bundles import reset_model, trust
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
from bench.commands.replay import add_waves_option, parse_speed
from bench.config.fleet import Device
from bench.core.console import compact_table, emit_json, err, out
from bench.core.errors import ConfigError
from bench.core.folders import write_file
from bench.core.outcomes import FailureClass
from bench.core.paths import SESSIONS_DIR
from bench.core.stopping import run_stoppable
from bench.devices.esp32c6 import check_firmware
from bench.models import kind_model
from bench.nightly.ci_report import nightly_report
from bench.nightly.flashing import ProgressFactory
from bench.nightly.orchestration import STAGE_NAMES, NightlyOptions, NightlyProgress, NightlyResult, run_nightly
from bench.nightly.publish import OTA_SESSION
from bench.nightly.stages import StageResult
from bench.replay.recording import read_session
from bench.report.build import outcome_of
from bench.results.thresholds import load_thresholds
from bench.store.results import open_store

DEFAULT_SESSIONS = SESSIONS_DIR


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `nightly` command."""
    p = sub.add_parser("nightly", help="flash, replay, update, fault suite, report and verdict (exit 1 on regression)")
    add_fleet_options(p, results="results store")
    p.add_argument("--sessions", metavar="DIR", help=f"session files (*.mcap) to replay (default: {DEFAULT_SESSIONS})")
    p.add_argument("--session", action="append", default=[], metavar="FILE", help="replay only this session file")
    add_verdict_options(p, baseline="the last accepted runs of each session")
    p.add_argument(
        "--model",
        metavar="FILE",
        help="put this .tflite under test on every selected device (signed with the"
        " configured key; converted to .npcm for MicroPython boards)",
    )
    p.add_argument("--firmware", metavar="FILE", help="flash this image to the selected ESP32-C6 boards")
    p.add_argument(
        "--fail-acknowledged", action=argparse.BooleanOptionalAction, default=None,
        help="acknowledged alerts still fail the night (default: the thresholds' [alerts] fail_acknowledged)",
    )  # fmt: skip
    p.add_argument("--skip", action="append", default=[], choices=STAGE_NAMES, help="leave out a stage")
    add_waves_option(p)
    add_ci_run_options(p, "--reports")
    p.set_defaults(func=cmd_nightly)


def session_files(args: argparse.Namespace) -> list[Path]:
    """The sessions to replay, each checked readable before any device is touched."""
    if args.session:
        files = [Path(f) for f in args.session]
    else:
        folder = Path(args.sessions) if args.sessions else DEFAULT_SESSIONS
        if not folder.is_dir():
            raise ConfigError(f"--sessions {folder}: not a folder")
        files = sorted(folder.glob("*.mcap"))
        if not files:
            raise ConfigError(f"--sessions {folder}: no *.mcap session files", hint="make some: hilbench session synth")
    return distinct_sessions(files)


def distinct_sessions(files: list[Path]) -> list[Path]:
    """`files`, each read (a bad file is a ConfigError naming it) and refused (exit 2, before any device is
    touched) when two hold one session id: their results, verdicts and metrics would be one session's."""
    seen: dict[str, Path] = {}
    for f in files:
        sid = read_session(f, values=False).session_id
        if sid in seen and seen[sid] != f:
            raise ConfigError(f"sessions {seen[sid]} and {f} have one session id {sid!r}",
                              hint="replay one of them, or give one a new id (hilbench session synth)")  # fmt: skip
        seen[sid] = f
    return files


def change_under_test(devices: list[Device], model: str | None, firmware: str | None) -> list[Device]:
    """The devices with the team's model and firmware files in their settings, each checked (and the model
    converted for MicroPython boards) before any device is touched: a ConfigError names the file and why."""
    if model:
        path = str(Path(model).resolve())
        devices = [d.with_settings(model=path) for d in devices]
        for d in devices:
            kind_model(d.kind, d.settings)
    if firmware:
        image = Path(firmware).resolve()
        check_firmware(image)
        with_fw = [d for d in devices if d.kind_info.firmware is not None]
        if not with_fw:
            raise ConfigError(f"--firmware {firmware}: no selected device takes a firmware image (ESP32-C6 boards do)")
        devices = [d.with_settings(firmware=str(image)) if d in with_fw else d for d in devices]
    return devices


def cmd_nightly(args: argparse.Namespace) -> int:
    """Run the nightly; print the summary (or JSON); exit 0 pass, 1 failure/regression, 3 nothing reachable."""
    fleet, devices = selected_devices(args)
    if not devices:
        raise ConfigError("no device matches the selection", hint="see `hilbench fleet list`")
    devices = change_under_test(devices, args.model, args.firmware)
    sessions = session_files(args)
    files = ci_files(args)
    store = open_store(results_at(args, fleet))
    if args.baseline and store.windows.named(args.baseline) is None:
        store.close()
        raise ConfigError(f"--baseline {args.baseline}: no such baseline", hint="see `hilbench baseline list`")
    devices = reset_model(devices)  # each night replays the fleet's configured model, not last night's update
    opts = NightlyOptions(
        fleet=fleet, devices=devices, sessions=sessions, store=store, reports_dir=args.output_dir,
        baseline=args.baseline, speed=parse_speed(args.speed), skip=frozenset(args.skip),
        thresholds=load_thresholds(args.thresholds), fail_acknowledged=args.fail_acknowledged, waves=args.waves,
    )  # fmt: skip
    trust.check(devices)
    with held_devices(devices, "nightly", args.lease_wait):
        result = run_stoppable(run_nightly(opts, None if args.json else _RichProgress()))
    summary = result.to_json()
    write_file(result.log_dir / "nightly.json", json.dumps(summary, indent=2, default=str))
    write_ci_files(nightly_report(result, store, opts.thresholds or load_thresholds()), files)
    store.close()
    if args.json:
        emit_json(summary)
    else:
        _print(result)
    return int(result.exit_code)


class _RichProgress(NightlyProgress):
    """Stage lines on stderr, with a progress bar per device while flashing."""

    def __init__(self) -> None:
        columns = (TextColumn("  {task.fields[device]:<10}"), TextColumn("{task.description:<9}"), BarColumn(),
                   TaskProgressColumn(), TimeElapsedColumn())  # fmt: skip
        self.bars = Progress(*columns, console=err, transient=True)

    def stage(self, name: str, devices: list[Device]) -> None:
        err.print(f"[bold]stage {name}[/bold] on {', '.join(d.name for d in devices)}")
        if name == "flash":
            self.bars.start()

    def done(self, result: StageResult) -> None:
        self.bars.stop()
        state = "[green]ok[/green]" if result.ok else "[red]FAILED[/red]"
        err.print(
            f"  {result.name}: {state} in {result.seconds:.1f} s" + (f" ({result.error})" if result.error else "")
        )

    def flash_bars(self) -> ProgressFactory:
        def progress_for(device: Device):
            task = self.bars.add_task("waiting", device=device.name, total=None)

            def update(done: int, total: int, what: str) -> None:
                self.bars.update(task, completed=done, total=total, description=what)

            return update

        return progress_for


def _print(result: NightlyResult) -> None:
    """The summary, readable in 80 columns: one row per device, one short word per stage; details follow."""
    out.print(stage_table(result))
    _print_runs(result)


def stage_table(result: NightlyResult) -> Table:
    """One row per device, one short word per stage (80 columns)."""
    table = compact_table(f"nightly {result.started}")
    table.add_column("device", no_wrap=True)
    for stage in result.stages:
        table.add_column(stage.name, no_wrap=True)
    devices = sorted({d for s in result.stages for d in s.devices})
    for d in devices:
        cells = []
        for stage in result.stages:
            o = stage.devices.get(d)
            if o is None:
                cells.append("-")
            elif not o.ok:
                cells.append("[red]FAILED[/red]")
            elif o.outcome is not None and o.outcome.passed_on_retry:
                cells.append("[yellow]retry ok[/yellow]")
            else:
                cells.append("skip" if o.skipped else _word(stage.name, o.detail))
        table.add_row(d, *cells)
    return table


def _print_runs(result: NightlyResult) -> None:
    """Per session its verdict and report, then the devices that failed, left or were skipped, and health."""
    for run in result.runs:
        if run.session == OTA_SESSION:
            out.print(f"updates and faults (run {run.run_id}): report {run.page}", highlight=False)
            continue
        outcome = outcome_of(run.verdicts)
        if run.regressions:
            verdict = f"[red]{len(run.regressions)} regression(s)[/red]"
        elif outcome == "pass":
            verdict = "[green]no regression[/green]" + (f"; {escape(run.note)}" if run.note else "")
        else:  # nothing was judged: saying "no regression" would claim a check that did not happen
            verdict = f"not judged ({escape(run.note or outcome)})"
        out.print(f"session {escape(str(run.session))} (run {run.run_id}): {verdict}", highlight=False)
        for v in run.regressions:
            out.print(f"  REGRESSION {v.device} {v.title}: {v.reason}", highlight=False)
        causes = result.confirmations[run.session].causes if run.session in result.confirmations else {}
        for device, cause in causes.items():
            out.print(f"  {device}: {cause}", highlight=False)
        for device, command in run.bisect.items():
            out.print(f"  first bad build on {device}: {command}", highlight=False)
        for v in run.with_status("not reproduced"):
            out.print(f"  not reproduced: {v.device} {v.title}: {v.reason}", highlight=False)
        busy = sorted({v.device for v in run.with_status("inconclusive")})
        if busy:
            out.print(f"  inconclusive (bench host busy): {', '.join(busy)}", highlight=False)
        out.print(f"  report {run.page}", highlight=False)
    _print_alerts(result)
    for name, outcome in sorted(result.outcomes().items()):
        if outcome.cls != FailureClass.PASS or outcome.passed_on_retry:
            out.print(f"[yellow]{name}[/yellow]: {outcome.label}", highlight=False)
    for name, why in result.dropped.items():
        out.print(f"[yellow]{name}[/yellow] left the run at {why}", highlight=False)
    for name, why in result.skipped.items():
        out.print(f"[red]{name}[/red] skipped: {why}", highlight=False)
    _print_health(result)
    if result.retention is not None:
        out.print(result.retention.line(), highlight=False)
    if result.time.sessions:
        out.print(result.time.table())
    out.print(result.time.headline(), highlight=False)
    out.print(f"exit {int(result.exit_code)}; logs and summary: {result.log_dir}", highlight=False)


def _print_alerts(result: NightlyResult) -> None:
    """The night's alerts: new ones first, then known ones (with their state), fixed and overdue ones."""
    alerts = result.alerts
    if alerts is None or not (alerts.new or alerts.known or alerts.fixed or alerts.overdue):
        return
    failing = len(alerts.failing)
    states = "untriaged and acknowledged" if alerts.rules.fail_acknowledged else "untriaged"
    out.print(
        f"alerts: {len(alerts.new)} new, {len(alerts.known)} known, {len(alerts.fixed)} fixed;"
        f" {failing} {states} fail the night",
        highlight=False,
    )
    for line in alerts.lines():
        out.print(line, highlight=False, markup=False)
    out.print("  triage: hilbench alerts list / ack ID --owner O --note N", highlight=False)


def _word(stage: str, detail: str) -> str:
    """One short word for a stage that worked on a device."""
    if stage == "confirm":
        if "regression" in detail:
            return "[red]regr.[/red]"
        return "not rep." if "not reproduced" in detail else "-"
    return "ok"


def _print_health(result: NightlyResult) -> None:
    """Each device's recorded state, its failures and recoveries (by ladder step) and MTBF over the history."""
    table = compact_table("device health")
    for col in ("device", "state", "failures", "recovered by", "MTBF"):
        table.add_column(col, no_wrap=col in ("device", "failures"), justify="right" if col == "failures" else "left")
    for h in result.health:
        colour = "green" if h.health.state == "good" else "red"
        state = f"[{colour}]{h.health.state}[/{colour}]" + (f" ({h.health.reason})" if h.health.reason else "")
        steps = ", ".join(f"{step} x{n}" for step, n in sorted(h.by_step.items())) or "-"
        mtbf = _hours(h.mtbf_h) if h.mtbf_h is not None else f"no failure in {_hours(h.hours_observed or 0)}"
        table.add_row(h.health.device, state, str(h.failures), steps, mtbf)
    out.print(table)
    if result.health_page:
        out.print(f"device health: {result.health_page}", highlight=False)


def _hours(hours: float) -> str:
    """A span for people: minutes under an hour, else hours."""
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"

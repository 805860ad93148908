"""`hilbench replay`: play a recorded session into every selected device at once, measure and store."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from bench.bundles import trust
from bench.commands import (
    add_device_options,
    add_fleet_options,
    add_output_dir,
    held_devices,
    results_at,
    selected_devices,
)
from bench.core.console import compact_table, emit_json, err, out
from bench.core.errors import ConfigError
from bench.core.outcomes import FailureClass
from bench.core.outcomes import exit_code as outcome_exit_code
from bench.core.stopping import run_stoppable
from bench.lab.acquire import reachable_devices
from bench.replay.agents import fleet_opener
from bench.replay.recording import Session, read_session
from bench.replay.run import DEFAULT_WAVES, SPLIT, TOGETHER, WAVE_POLICIES, DeviceRun, ReplayRun
from bench.replay.service import ReplayResult, replay_fleet
from bench.store.results import open_store

# (measurement, header, scale, format, in the compact default): the default fits 80 columns; --wide shows all
SUMMARY_COLUMNS = (
    ("fps", "FPS", 1.0, "{:.1f}", True),
    ("inference_latency_p50", "infer P50 ms", 1e-3, "{:.2f}", False),
    ("inference_latency_p99", "infer P99 ms", 1e-3, "{:.2f}", True),
    ("decision_latency_p50", "decision P50 ms", 1e-3, "{:.1f}", False),
    ("decision_latency_p99", "decision P99 ms", 1e-3, "{:.1f}", True),
    ("decision_deadline_misses", "misses", 1.0, "{:.0f}", True),
    ("frame_jitter_p99", "jitter P99 us", 1.0, "{:.0f}", False),
    ("replay_send_error_p99", "send err P99 us", 1e-3, "{:.1f}", False),
    ("replay_release_error_p99", "release err P99 us", 1e-3, "{:.1f}", False),  # replayed on the device's clock
    ("replay_covered", "played s", 1.0, "{:.1f}", False),
    ("faults", "faults", 1.0, "{:.0f}", True),
)
STATUS_WORDS = {FailureClass.PASS: "ok", FailureClass.INFRASTRUCTURE: "infra", FailureClass.PRODUCT: "product"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `replay` command."""
    p = sub.add_parser("replay", help="play a recorded session into the selected devices at once and measure")
    add_fleet_options(p, results="results store")
    p.add_argument("--session", required=True, metavar="FILE", help="session file (MCAP; see `hilbench session`)")
    p.add_argument("--speed", default="1", metavar="X", help="time factor (2 = twice as fast), or 'max'")
    p.add_argument("--voice", choices=("auto", "voice", "voicef"), default="auto",
                   help="voice as PCM or per-10 ms features (auto: features on links too slow for PCM)")  # fmt: skip
    p.add_argument("--deploy", action="store_true", help="deploy agent and model first (skipped when up to date)")
    p.add_argument("--no-realtime", action="store_true", help="pace at normal scheduling priority")
    add_waves_option(p)
    p.add_argument("--wide", action="store_true", help="every measurement in the summary (wider than 80 columns)")
    add_output_dir(p, logs="logs/")
    add_device_options(p)
    p.set_defaults(func=cmd_replay)


def add_waves_option(p: argparse.ArgumentParser) -> None:
    """`--waves`: how a replay groups its devices (bench.replay.run.waves)."""
    p.add_argument(
        "--waves", choices=WAVE_POLICIES, default=DEFAULT_WAVES,
        help=f"{TOGETHER} (default): all at once, the emulated guests at the lowest CPU priority; {SPLIT}: "
        "bench-clock devices first, then the guests (docs/replay.md)",
    )  # fmt: skip


def parse_speed(text: str) -> float | None:
    """--speed: a positive factor, or 'max' (None: as fast as possible)."""
    if text.lower() in ("max", "asap", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(
            f"--speed {text!r}: not a number", hint="e.g. --speed 1, --speed 2.5 or --speed max"
        ) from None
    if not 0 < value < float("inf"):  # NaN fails this too
        raise ConfigError(f"--speed {text}: must be a positive number (or 'max')")
    return value


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay, show live progress, print a summary table per device (or JSON); exit 0 / 1 / 3."""
    speed = parse_speed(args.speed)
    session = read_session(args.session)  # a bad file is reported before any device is touched
    fleet, devices = selected_devices(args)
    if not devices:
        raise ConfigError("no device matches the selection", hint="see `hilbench fleet list`")
    location = results_at(args, fleet)
    store = open_store(location)
    logs = args.logs or args.output_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    if args.deploy:
        trust.check(devices)
    with held_devices(devices, "replay", args.lease_wait):
        result = run_stoppable(_run(args, session, devices, store, speed, logs, fleet.bench.name))
    store.close()
    if args.json:
        emit_json(result_json(result, store.path))
    else:
        out.print(summary_table(result, wide=args.wide))
        for line in device_notes(result.devices):
            out.print(line, highlight=False)
        out.print(f"run {result.run_id} stored in {store.path}")
    return exit_code(result)


async def _run(args, session: Session, devices, store, speed, logs: Path, bench: str) -> ReplayResult:
    live = None if args.json else Live(console=err, refresh_per_second=2, transient=True)

    def progress(run: ReplayRun) -> None:
        if live is not None:
            live.update(progress_table(run))

    async with reachable_devices(devices) as (resolved, _running):
        if live is not None:
            live.start()
        try:
            return await replay_fleet(
                resolved, session, store, make_opener=lambda run_id: fleet_opener(store, run_id, logs, args.deploy),
                speed=speed, voice=args.voice, waves=args.waves,
                realtime=not args.no_realtime, bench=bench, progress=progress,
            )  # fmt: skip
        finally:
            if live is not None:
                live.stop()


def progress_table(run: ReplayRun) -> Table:
    """Live view: per device, its state, inputs sent and frame records received."""
    total = len(run.plan.inputs)
    table = compact_table(f"replaying {run.plan.session_id} ({total} inputs per device)")
    for col in ("device", "state", "inputs", "frames"):
        table.add_column(col)
    for r in run.runs:
        sent = r.track.sent if r.track else 0
        table.add_row(r.device.name, r.status, f"{sent}/{total}", str(len(r.frames)))
    return table


def _value(r: DeviceRun, name: str) -> float | None:
    if r.result is None:
        return None
    return next((m.value for m in r.result.measurements if m.name == name), None)


def device_notes(runs: list) -> list[str]:
    """A line (rich markup) per device that did not pass or has a detail: what an agent said is escaped, so its
    text is never read as markup (a `[/x]` in it would stop the command)."""
    lines = []
    for r in runs:
        outcome = r.outcome
        if outcome.cls != FailureClass.PASS:
            lines.append(f"[yellow]{escape(r.device.name)}[/yellow]: {escape(outcome.label)}")
        elif r.detail:
            lines.append(f"[yellow]{escape(r.device.name)}[/yellow]: {escape(r.detail)}")
    return lines


def summary_table(result: ReplayResult, *, wide: bool = False) -> Table:
    """One row per device: status and the headline measurements (80 columns); `wide`: voice mode and all."""
    speed = "max" if result.speed is None else f"{result.speed:g}x"
    title = f"replay run {result.run_id}: {result.session_id} at {speed}" + (
        " (pacer at normal priority)" if result.realtime is False and result.speed is not None else ""
    )
    columns = [c for c in SUMMARY_COLUMNS if wide or c[4]]
    table = compact_table(title)
    table.add_column("device", no_wrap=True)
    table.add_column("status", no_wrap=True)
    if wide:
        table.add_column("voice", no_wrap=True)
    for _, label, _, _, _ in columns:
        table.add_column(label, justify="right")
    for r in result.devices:
        cells = []
        for name, _, scale, fmt, _ in columns:
            v = _value(r, name)
            cells.append("-" if v is None else fmt.format(v * scale))
        outcome = r.outcome
        colour = "green" if outcome.cls == FailureClass.PASS else "red"
        word = STATUS_WORDS.get(outcome.cls, str(outcome.cls))  # the full label follows the table
        voice = [str(r.track.mode) if r.track else "-"] if wide else []
        table.add_row(r.device.name, f"[{colour}]{word}[/{colour}]", *voice, *cells)
    return table


def result_json(result: ReplayResult, store_path: Path) -> dict:
    """The --json document."""
    return {
        "run_id": result.run_id,
        "store": str(store_path),
        "session": result.session_id,
        "inputs": result.inputs,
        "speed": result.speed,
        "realtime_priority": result.realtime,
        "status": result.status,
        "devices": [
            {
                "name": r.device.name,
                "kind": r.device.kind,
                "status": r.status,
                "detail": r.detail,
                "outcome": r.outcome.to_json(),
                "voice_mode": str(r.track.mode) if r.track else None,
                "voice_reason": r.track.mode_reason if r.track else None,
                "inputs_sent": r.track.sent if r.track else 0,
                "frames": len(r.frames),
                "measurements": {m.name: m.to_dict() for m in r.result.measurements} if r.result else {},
                "faults": [f.to_dict() for f in r.result.faults] if r.result else [],
            }
            for r in result.devices
        ],
    }


def exit_code(result: ReplayResult) -> int:
    """By the devices' failure classes: 1 when the product failed on one, 3 when only infrastructure failed
    (a device that stopped answering, also one the recovery ladder brought back), else 0."""
    return outcome_exit_code(r.outcome for r in result.devices)

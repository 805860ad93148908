"""`hilbench flash`: firmware and agent onto every selected device at once, with a progress bar per device."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.bundles import reset_model, trust
from bench.commands import add_device_options, add_fleet_options, add_output_dir, held_devices, selected_devices
from bench.commands.values import int_in
from bench.core.console import compact_table, emit_json, err, out
from bench.core.errors import ConfigError, ExitCode
from bench.core.inputs import check_file
from bench.core.outcomes import exit_code
from bench.core.stopping import run_stoppable
from bench.devices import has_driver
from bench.lab.acquire import reachable_devices
from bench.nightly.flashing import DEFAULT_ATTEMPTS, DeviceFlash, flash_devices
from bench.virtual import board_controls


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `flash` command."""
    p = sub.add_parser("flash", help="flash firmware and deploy the agent to the selected devices, in parallel")
    add_fleet_options(p)
    p.add_argument("--firmware", metavar="PATH", help="firmware image for boards that take one (ESP32-C6: at 0x0)")
    p.add_argument(
        "--os",
        action="store_true",
        help="Linux boards with [device.os]: write their OS image where the fingerprint differs",
    )
    p.add_argument("--reflash", action="store_true", help="with --os: write the OS image even when it matches")
    p.add_argument("--attempts", type=int_in(1, 100), default=DEFAULT_ATTEMPTS, help="tries per device (default 3)")
    add_device_options(p)
    p.add_argument(
        "--reset-model",
        action="store_true",
        help="run the fleet's model again (by default a flash keeps the model an update installed)",
    )
    add_output_dir(p, logs="flash-<time>/")
    p.set_defaults(func=cmd_flash)


def cmd_flash(args: argparse.Namespace) -> int:
    """Flash the selection; exit 2 if a device's input was refused before it was touched (an image the fleet
    does not pin, a bmap that does not describe its image), else by the devices' failure classes (bench.core.outcomes:
    3 when only infrastructure failed)."""
    _fleet, devices = selected_devices(args)
    devices = [d for d in devices if has_driver(d.kind)]
    if not devices:
        raise ConfigError("no selected device has a driver that can flash it")
    firmware = Path(args.firmware) if args.firmware else None
    if firmware is not None:
        check_file(firmware, "firmware", hint="pass --firmware PATH to an ESP32-C6 image")
    log_dir = args.logs or args.output_dir / f"flash-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.reflash and not args.os:
        raise ConfigError("--reflash only goes with --os")
    trust.check(devices)
    if args.reset_model:
        devices = reset_model(devices)
    with held_devices(devices, "flash", args.lease_wait):
        results = run_stoppable(_run(devices, log_dir, firmware, args, show=not args.json))
    if args.json:
        emit_json({"ok": all(r.ok for r in results), "logs": str(log_dir), "devices": [r.as_dict() for r in results]})
    else:
        out.print(_table(results))
        out.print(f"logs: {log_dir}")
    if any(r.refused for r in results):
        return ExitCode.USAGE
    return exit_code(r.outcome for r in results)


async def _run(
    devices, log_dir: Path, firmware: Path | None, args: argparse.Namespace, *, show: bool
) -> list[DeviceFlash]:
    columns = (TextColumn("{task.fields[device]:<12}"), TextColumn("{task.description:<9}"), BarColumn(),
               TaskProgressColumn(), TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=err, disable=not show, transient=False) as bars:
        async with reachable_devices(devices) as (resolved, running):
            tasks = {d.name: bars.add_task("waiting", device=d.name, total=None) for d in resolved}

            def progress_for(device):
                task = tasks[device.name]

                def update(done: int, total: int, what: str) -> None:
                    bars.update(task, completed=done, total=total, description=what)

                return update

            results = await flash_devices(
                resolved, log_dir, progress_for, firmware=firmware, attempts=args.attempts,
                os=args.os, force_os=args.reflash, boards=board_controls(running),
            )  # fmt: skip
            for r in results:
                bars.update(tasks[r.name], description="ok" if r.ok else "FAILED", completed=1, total=1)
            return results


def _table(results: list[DeviceFlash]) -> Table:
    table = compact_table("flash")
    for col in ("device", "kind", "result", "tries", "s", "detail"):
        table.add_column(col, no_wrap=col != "detail", justify="right" if col in ("tries", "s") else "left")
    for r in results:
        if r.ok:
            result = "[green]up to date[/green]" if r.up_to_date else "[green]flashed[/green]"
            detail = "; ".join(f"{s.step}: {s.detail}" for s in r.steps)
        else:
            result, detail = "[red]FAILED[/red]", r.outcome.label
        table.add_row(r.name, r.kind, result, str(r.attempts), f"{r.seconds:.1f}", detail)
    return table

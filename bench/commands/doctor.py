"""`hilbench doctor`: is this bench host ready for the selected devices? Prints each missing thing and its fix."""

from __future__ import annotations

import argparse

from rich.markup import escape

from bench.commands import add_fleet_options, add_output_dir, selected_devices
from bench.core.console import emit_json, out
from bench.core.errors import ExitCode
from bench.lab.doctor import FAIL, OK, WARN, diagnose

_MARK = {OK: "[green]ok[/green]  ", WARN: "[yellow]warn[/yellow]", FAIL: "[red]FAIL[/red]"}


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `doctor` command."""
    p = sub.add_parser("doctor", help="check this bench host has what the selected devices need (exit 2 if not)")
    add_fleet_options(p)
    add_output_dir(p, "--reports")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Run every check; exit 2 when something the fleet needs is missing."""
    fleet, devices = selected_devices(args)
    findings = diagnose(fleet, devices, args.output_dir)
    failed = [f for f in findings if f.status == FAIL]
    if args.json:
        emit_json({"ok": not failed, "fleet": str(fleet.path), "devices": [d.name for d in devices],
                   "findings": [f.to_json() for f in findings]})  # fmt: skip
    else:
        for f in findings:
            line = f"{_MARK[f.status]} {escape(f.check)}: {escape(f.detail)}"
            if f.devices and f.status != OK:
                line += f" [dim](devices: {escape(', '.join(f.devices))})[/dim]"
            out.print(line, highlight=False, soft_wrap=True)
            if f.fix and f.status != OK:
                out.print(f"       fix: {escape(f.fix)}", highlight=False, soft_wrap=True)
        verdict = f"{len(failed)} missing: the fleet cannot run" if failed else "ready"
        out.print(
            f"doctor: {len(devices)} device(s) of {escape(str(fleet.path))}: {verdict}", highlight=False, soft_wrap=True
        )
    return ExitCode.USAGE if failed else ExitCode.OK

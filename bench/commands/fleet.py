"""`hilbench fleet list|check|leases`."""

from __future__ import annotations

import argparse
import asyncio
import time

from rich.table import Table

from bench.commands import add_fleet_options, selected_devices
from bench.console import emit_json, out
from bench.devices import has_driver
from bench.errors import ExitCode
from bench.fleet import Device
from bench.lab.acquire import reachable_devices
from bench.leases import lease_dir, list_leases
from bench.probe import probe_link
from bench.virtual import has_virtual


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `fleet` command group."""
    fleet = sub.add_parser("fleet", help="inspect the fleet file and its devices")
    fsub = fleet.add_subparsers(dest="fleet_command", required=True)
    p = fsub.add_parser("list", help="list the fleet's devices")
    add_fleet_options(p)
    p.set_defaults(func=cmd_list)
    p = fsub.add_parser("check", help="probe every device through its link (exit 3 if any is unreachable)")
    add_fleet_options(p)
    p.set_defaults(func=cmd_check)
    p = fsub.add_parser("leases", help="show which bench process holds which device")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_leases)


def link_text(device: Device) -> str:
    """The device's link as a person would write it."""
    if device.link is not None:
        return device.link.describe()
    if device.lab is not None:
        if device.lab.place:
            return f"labgrid place {device.lab.place} on {device.lab.host}"
        return "labgrid place with " + " ".join(f"{k}={v}" for k, v in sorted(device.lab.tags.items()))
    return "virtual (started on demand)"


def cmd_list(args: argparse.Namespace) -> int:
    """Print the selected devices."""
    fleet, devices = selected_devices(args)
    rows = [
        {"name": d.name, "kind": d.kind, "link": link_text(d), "virtual": d.virtual, "tags": list(d.tags)}
        for d in devices
    ]
    if args.json:
        emit_json({"fleet": str(fleet.path), "devices": rows})
        return ExitCode.OK
    table = Table(title=f"fleet {fleet.path}")
    for col in ("name", "kind", "link", "virtual", "tags"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["name"], r["kind"], r["link"], "yes" if r["virtual"] else "", ", ".join(r["tags"]))
    out.print(table)
    return ExitCode.OK


async def check_devices(devices: list[Device]) -> list[dict]:
    """Start what is virtual, probe every device's link, and describe what the bench can do with it."""
    async with reachable_devices(devices) as (resolved, _running):
        results = await asyncio.gather(*(probe_link(d) for d in resolved))
    rows = []
    for dev, res in zip(resolved, results, strict=True):
        if dev.virtual and not has_virtual(dev.kind) and dev.link is None:  # QEMU devices carry their own link
            status, detail = "no virtual device yet", f"no virtual {dev.kind} implementation yet"
        else:
            status, detail = ("reachable" if res.reachable else "unreachable"), res.detail
        rows.append(
            {
                "name": dev.name,
                "kind": dev.kind,
                "status": status,
                "reachable": status == "reachable",
                "driver": "yes" if has_driver(dev.kind) else "no driver yet",
                "detail": detail,
            }
        )
    return rows


def cmd_check(args: argparse.Namespace) -> int:
    """Probe the selected devices; exit 3 when any is unreachable."""
    fleet, devices = selected_devices(args)
    started = time.monotonic()
    rows = asyncio.run(check_devices(devices))
    code = ExitCode.OK if all(r["status"] != "unreachable" for r in rows) else ExitCode.UNREACHABLE
    if args.json:
        emit_json({"fleet": str(fleet.path), "devices": rows, "seconds": round(time.monotonic() - started, 3)})
        return code
    table = Table(title=f"fleet check: {fleet.path}")
    for col in ("name", "kind", "status", "driver", "detail"):
        table.add_column(col)
    colours = {"reachable": "green", "unreachable": "red"}
    for r in rows:
        colour = colours.get(r["status"], "yellow")
        table.add_row(r["name"], r["kind"], f"[{colour}]{r['status']}[/{colour}]", r["driver"], r["detail"])
    out.print(table)
    return code


def cmd_leases(args: argparse.Namespace) -> int:
    """Show the device leases, live and stale."""
    leases = list_leases()
    now = time.time()
    rows = [
        {
            "device": i.device,
            "holder": i.holder,
            "host": i.host,
            "pid": i.pid,
            "alive": i.alive,
            "expires_in_s": round(i.expires - now, 1),
        }
        for i in leases
    ]
    if args.json:
        emit_json({"lease_dir": str(lease_dir()), "leases": rows})
        return ExitCode.OK
    table = Table(title=f"leases in {lease_dir()}")
    for col in ("device", "holder", "host", "pid", "state", "expires in"):
        table.add_column(col)
    for r in rows:
        state = "[green]held[/green]" if r["alive"] else "[dim]stale[/dim]"
        table.add_row(r["device"], r["holder"], r["host"], str(r["pid"]), state, f"{r['expires_in_s']:.0f} s")
    out.print(table)
    return ExitCode.OK

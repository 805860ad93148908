"""`hilbench fleet list|check|leases|health|discover`."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from rich.table import Table

from bench.commands import (
    add_device_command,
    add_fleet_options,
    add_output_dir,
    add_results_option,
    held_devices,
    results_at,
    selected_devices,
)
from bench.config.fleet import Device
from bench.core.console import compact_table, emit_json, err, out
from bench.core.errors import ExitCode
from bench.core.leases import lease_dir, list_leases
from bench.core.stopping import run_stoppable
from bench.devices import has_driver
from bench.devices.probe import probe_link
from bench.lab.acquire import reachable_devices
from bench.virtual import has_virtual


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `fleet` command group."""
    fleet = sub.add_parser("fleet", help="inspect the fleet file and its devices")
    fsub = fleet.add_subparsers(dest="fleet_command", required=True)
    p = fsub.add_parser("list", help="list the fleet's devices")
    add_fleet_options(p, results="results store")
    p.set_defaults(func=cmd_list)
    add_device_command(fsub, "check", "probe every device through its link (exit 3 if any is unreachable)", cmd_check)
    p = fsub.add_parser("leases", help="show which bench process holds which device")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_leases)
    p = add_device_command(
        fsub, "health", "check that devices answer; --fix runs the recovery ladder (exit 3 if one is bad)", cmd_health
    )
    p.add_argument("--fix", action="store_true", help="recover devices that do not answer; mark them good again")
    add_results_option(p, what="results store the health records go to")
    add_output_dir(p, logs="health/")
    p = fsub.add_parser("discover", help="find the ESP boards plugged into this host and print fleet entries")
    p.add_argument("--write", metavar="FILE", help="add the new boards to this fleet file (none twice: by MAC)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_discover)


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
    table = compact_table(f"fleet {fleet.path}")
    for col in ("name", "kind", "link", "virtual", "tags"):
        table.add_column(col, no_wrap=col in ("name", "kind", "virtual"))
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
    with held_devices(devices, "fleet check", args.lease_wait):
        rows = run_stoppable(check_devices(devices))
    code = ExitCode.OK if all(r["status"] != "unreachable" for r in rows) else ExitCode.UNREACHABLE
    if args.json:
        emit_json({"fleet": str(fleet.path), "devices": rows, "seconds": round(time.monotonic() - started, 3)})
        return code
    out.print(check_table(str(fleet.path), rows))
    return code


def check_table(fleet: str, rows: list[dict]) -> Table:
    """`fleet check`'s table, in 80 columns: the detail wraps under its own header."""
    table = compact_table(f"fleet check: {fleet}")
    for col in ("name", "kind", "status", "driver", "detail"):
        table.add_column(col, no_wrap=col != "detail", ratio=1 if col == "detail" else None)
    colours = {"reachable": "green", "unreachable": "red"}
    for r in rows:
        colour = colours.get(r["status"], "yellow")
        table.add_row(r["name"], r["kind"], f"[{colour}]{r['status']}[/{colour}]", r["driver"], r["detail"])
    return table


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
    out.print(leases_table(str(lease_dir()), rows))
    return ExitCode.OK


def leases_table(folder: str, rows: list[dict]) -> Table:
    """`fleet leases`' table, in 80 columns."""
    table = compact_table(f"leases in {folder}")
    for col in ("device", "holder", "host", "pid", "state", "expires"):
        folds = col in ("holder", "host")  # a long host name folds rather than being cut
        table.add_column(col, no_wrap=not folds, overflow="fold" if folds else "ellipsis",
                         justify="right" if col == "pid" else "left")  # fmt: skip
    for r in rows:
        state = "[green]held[/green]" if r["alive"] else "[dim]stale[/dim]"
        table.add_row(r["device"], r["holder"], r["host"], str(r["pid"]), state, f"{r['expires_in_s']:.0f} s")
    return table


def cmd_health(args: argparse.Namespace) -> int:
    """Check (and with --fix recover) the selected devices; exit 0 when all are good, 3 otherwise."""
    from bench.recovery.fleet_health import check_fleet  # here, as every heavy import: `fleet list` must start fast
    from bench.recovery.records import summary
    from bench.store.results import open_store

    fleet, devices = selected_devices(args)
    store = open_store(results_at(args, fleet))
    try:
        with held_devices(devices, "fleet health", args.lease_wait):
            checks = run_stoppable(
                check_fleet(devices, store, fix=args.fix, log_dir=args.logs or args.output_dir / "health")
            )
        summaries = {c.device: summary(store, c.device) for c in checks}
    finally:
        store.close()
    code = ExitCode.OK if all(c.answered and c.state == "good" for c in checks) else ExitCode.UNREACHABLE
    if args.json:
        emit_json({"fleet": str(fleet.path), "fix": args.fix, "devices": [
            {**c.to_json(), "history": summaries[c.device].to_json()} for c in checks]})  # fmt: skip
        return code
    out.print(health_table(f"fleet health{' --fix' if args.fix else ''}: {fleet.path}", checks))
    return code


def health_table(title: str, checks: list) -> Table:
    """`fleet health`'s table (one row per HealthCheck), in 80 columns."""
    table = compact_table(title)
    for col in ("device", "state", "answer", "detail"):
        table.add_column(col, no_wrap=col != "detail", ratio=1 if col == "detail" else None)
    for c in checks:
        colour = "green" if c.state == "good" else "red"
        change = f"{c.before} -> {c.state}" if c.before != c.state else c.state
        table.add_row(c.device, f"[{colour}]{change}[/{colour}]", "yes" if c.answered else "no", c.detail)
    return table


def cmd_discover(args: argparse.Namespace) -> int:
    """Print fleet entries for the boards found (TOML on stdout), or add them to --write FILE; exit 3 when a
    board could not be identified."""
    from bench.devices.discovery import append_entries, discover, new_entries

    target = Path(args.write) if args.write else None
    boards = run_stoppable(discover())
    entries, known = new_entries(boards, target)
    if target is not None and entries:
        append_entries(target, [text for _board, text in entries])
    code = ExitCode.UNREACHABLE if any(b.error for b in boards) else ExitCode.OK
    if args.json:
        emit_json({"boards": [b.to_json() for b in boards], "written": str(target) if target else None,
                   "new": [b.port for b, _ in entries], "already_listed": [b.port for b in known]})  # fmt: skip
        return code
    for b in boards:
        if b.error:
            err.print(f"{b.port} ({b.bridge}): not identified: {b.error}", highlight=False)
        elif b.kind is None:
            err.print(f"{b.port}: {b.chip} {b.mac}: no device kind for this chip", highlight=False)
    for b in known:
        err.print(f"{b.port}: {b.chip} {b.mac}: already in {target}", highlight=False)
    if target is not None:
        err.print(f"{len(entries)} new board(s) added to {target}" if entries else f"no new board for {target}")
    else:
        sys.stdout.write("\n".join(text for _board, text in entries))
        if not boards:
            err.print("no serial board found (USB bridges: Espressif USB-Serial-JTAG, CP210x, CH34x, FTDI)")
    return code

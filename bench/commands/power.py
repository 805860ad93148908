"""`hilbench power on|off|cycle|status`: switch the selected devices' supplies (their fleet `power` table)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.table import Table

from bench.commands import add_device_command, held_devices, selected_devices
from bench.commands.values import float_in
from bench.config.fleet import Device
from bench.core.console import emit_json, out
from bench.core.errors import BenchError, ConfigError, ExitCode
from bench.core.stopping import run_stoppable
from bench.lab.acquire import reachable_devices
from bench.power import power_for

ACTIONS = ("on", "off", "cycle", "status")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `power` command."""
    p = add_device_command(
        sub, "power", "switch devices' power (uhubctl hub port, relay/PDU command, labgrid place)", cmd_power
    )
    p.add_argument("action", choices=ACTIONS)
    p.add_argument(
        "--off-s", type=float_in(0.0, 3600.0), metavar="S", help="cycle: seconds without power (default: the fleet's)"
    )


async def _one(device: Device, action: str, off_s: float | None) -> dict[str, Any]:
    power = power_for(device)
    assert power is not None
    row: dict[str, Any] = {"device": device.name, "driver": power.where, "ok": True, "detail": ""}
    try:
        if action == "on":
            await power.on()
        elif action == "off":
            await power.off()
        elif action == "cycle":
            await power.cycle(off_s)
        row["state"] = str(await power.status())
    except BenchError as exc:
        row.update(ok=False, state="unknown", detail=str(exc).splitlines()[0])
    return row


async def power_devices(devices: list[Device], action: str, off_s: float | None = None) -> list[dict[str, Any]]:
    """Apply `action` to every device (lab places acquired and virtual boards started for the command)."""
    async with reachable_devices(devices) as (resolved, _running):
        return list(await asyncio.gather(*(_one(d, action, off_s) for d in resolved)))


def cmd_power(args: argparse.Namespace) -> int:
    """Exit 0 when every device did it, 3 when a power backend failed, 2 when a device has no `power` table."""
    fleet, selected = selected_devices(args)
    devices = [d for d in selected if d.power is not None]
    missing = [d.name for d in selected if d.power is None]
    if missing and (args.device or not devices):
        raise ConfigError(
            f"{fleet.path}: device(s) {', '.join(missing)} have no `power` table",
            hint='add e.g. power = { driver = "uhubctl", location = "1-1", port = 2 } (see docs/lab-control.md)',
        )
    if args.action == "status":
        rows = run_stoppable(power_devices(devices, args.action))
    else:
        with held_devices(devices, f"power {args.action}", args.lease_wait):
            rows = run_stoppable(power_devices(devices, args.action, args.off_s))
    code = ExitCode.OK if all(r["ok"] for r in rows) else ExitCode.UNREACHABLE
    if args.json:
        emit_json({"fleet": str(fleet.path), "action": args.action, "devices": rows, "no_power": missing})
        return code
    table = Table(title=f"power {args.action}")
    for col in ("device", "driver", "state", "detail"):
        table.add_column(col, overflow="fold")
    for r in rows:
        colour = {"on": "green", "off": "yellow"}.get(r["state"], "red")
        table.add_row(r["device"], r["driver"], f"[{colour}]{r['state']}[/{colour}]", r["detail"])
    out.print(table)
    if missing:
        out.print(f"no `power` table (left out): {', '.join(missing)}", highlight=False)
    return code

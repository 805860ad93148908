"""`hilbench energy`: read the selected devices' power meters (their fleet `energy` table) for a while."""

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
from bench.energy.meters import meter_for
from bench.lab.acquire import reachable_devices
from bench.measure.energy import Integrator


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `energy` command."""
    p = add_device_command(sub, "energy", "read devices' power meters (PPK2, Joulescope, tegrastats, PMIC, hwmon)",
                           cmd_energy)  # fmt: skip
    p.add_argument("--seconds", type=float_in(0.5, 3600.0), default=5.0, metavar="S", help="how long (default 5)")


async def _one(device: Device, seconds: float) -> dict[str, Any]:
    row: dict[str, Any] = {"device": device.name, "meter": device.energy.driver if device.energy else "", "ok": True}
    try:
        meter = meter_for(device)
        assert meter is not None
        row["meter"] = meter.name
        await meter.start()
        await asyncio.sleep(seconds)
        await asyncio.sleep(2 * meter.period_s)  # the block's last samples arrive
        samples = await meter.stop()
        if not samples:
            raise BenchError(f"device {device.name!r}: meter {meter.name}: no samples in {seconds:g} s"
                             + (f" ({'; '.join(meter.errors)})" if meter.errors else ""))  # fmt: skip
        whole = Integrator(samples)
        span_s = (whole.end_ns - whole.start_ns) / 1e9
        row.update(samples=len(samples), seconds=round(span_s, 3), energy_mj=round(whole.energy_mj(whole.start_ns,
                   whole.end_ns), 3), period_s=meter.period_s)  # fmt: skip
        row["mean_mw"] = round(row["energy_mj"] / span_s, 3) if span_s > 0 else None
    except BenchError as exc:
        row.update(ok=False, detail=str(exc).splitlines()[0])
    return row


async def measure_devices(devices: list[Device], seconds: float) -> list[dict[str, Any]]:
    """Read every device's meter at once for `seconds` (virtual boards started for the command)."""
    async with reachable_devices(devices) as (resolved, _running):
        return list(await asyncio.gather(*(_one(d, seconds) for d in resolved)))


def cmd_energy(args: argparse.Namespace) -> int:
    """Exit 0 when every meter gave samples, 3 when one failed, 2 when a device has no `energy` table."""
    fleet, selected = selected_devices(args)
    devices = [d for d in selected if d.energy is not None]
    missing = [d.name for d in selected if d.energy is None]
    if missing and (args.device or not devices):
        hint = 'add e.g. energy = { driver = "ppk2", port = "/dev/ttyACM3" } (docs/lab-control.md)'
        raise ConfigError(f"{fleet.path}: device(s) {', '.join(missing)} have no `energy` table", hint=hint)
    with held_devices(devices, "energy", args.lease_wait):
        rows = run_stoppable(measure_devices(devices, args.seconds))
    code = ExitCode.OK if all(r["ok"] for r in rows) else ExitCode.UNREACHABLE
    if args.json:
        emit_json({"fleet": str(fleet.path), "devices": rows, "no_meter": missing})
        return code
    table = Table(title=f"energy over {args.seconds:g} s")
    for col in ("device", "meter", "mean power", "energy", "samples", "detail"):
        table.add_column(col, overflow="fold")
    for r in rows:
        mean = f"{r['mean_mw']:.1f} mW" if r.get("mean_mw") is not None else "—"
        energy = f"{r['energy_mj']:.1f} mJ" if "energy_mj" in r else "—"
        table.add_row(r["device"], r["meter"], mean, energy, str(r.get("samples", "")), r.get("detail", ""))
    out.print(table)
    if missing:
        out.print(f"no `energy` table (left out): {', '.join(missing)}", highlight=False)
    return code

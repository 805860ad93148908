"""`hilbench virtual up`: start the fleet's virtual devices and serve them until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace

from bench.commands import add_device_command, held_devices, selected_devices
from bench.core.console import out
from bench.core.errors import ConfigError, ExitCode
from bench.core.stopping import StopSignals
from bench.virtual import has_virtual, virtual_fleet


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `virtual` command group."""
    virtual = sub.add_parser("virtual", help="virtual devices (real-protocol stand-ins for boards)")
    vsub = virtual.add_subparsers(dest="virtual_command", required=True)
    add_device_command(vsub, "up", "start the fleet's virtual devices; print their URLs; serve until Ctrl-C", cmd_up)


def cmd_up(args: argparse.Namespace) -> int:
    """Serve the selected virtual devices."""
    _fleet, devices = selected_devices(args)
    # serving here is what was asked for, also for lab devices (`hilbench lab exporter-config --virtual-urls`)
    wanted = [replace(d, lab=None) for d in devices if d.virtual and has_virtual(d.kind)]
    if not wanted:
        raise ConfigError("no selected device is virtual with a kind the bench can stand in for")
    with held_devices(wanted, "virtual up", args.lease_wait):
        asyncio.run(_serve(wanted, as_json=args.json))
    return ExitCode.OK


async def _serve(devices, *, as_json: bool) -> None:
    with StopSignals() as stop:
        await _serve_until(devices, stop, as_json=as_json)
        stop.raise_if_stopped()


async def _serve_until(devices, stop: StopSignals, *, as_json: bool) -> None:
    async with virtual_fleet(devices) as (_resolved, running):
        for device in devices:
            urls = running[device.name].urls()
            if as_json:
                sys.stdout.write(json.dumps({"name": device.name, "kind": device.kind, "urls": urls}) + "\n")
                sys.stdout.flush()
            else:
                out.print(f"[bold]{device.name}[/bold] ({device.kind})")
                for scheme, url in urls.items():
                    out.print(f"  {scheme:<8} {url}", highlight=False)
        if not as_json:
            out.print("serving; Ctrl-C to stop")
        await stop.wait()

"""`hilbench update`: push a model version to the selected devices over CoAP, concurrently."""

from __future__ import annotations

import argparse
import asyncio

from rich.table import Table

from bench.commands import add_fleet_options, selected_devices
from bench.commands.model import add_store_option, open_store
from bench.console import emit_json, out
from bench.devices import driver_for, has_driver
from bench.errors import BenchError, ConfigError, ExitCode
from bench.fleet import Device
from bench.ota.rollout import DeviceUpdate, bind_address, update_device
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.ota.timing import LinkTiming, timing_named
from bench.virtual import virtual_fleet


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `update` command."""
    p = sub.add_parser("update", help="update the model on the selected devices over CoAP (exit 1 if any failed)")
    add_fleet_options(p)
    p.add_argument("--model", required=True, metavar="NAME[@VERSION]", help="published model (default: latest)")
    p.add_argument("--delta", action="store_true", help="send a bsdiff4 delta where the device's model allows")
    add_store_option(p)
    p.set_defaults(func=cmd_update)


def cmd_update(args: argparse.Namespace) -> int:
    """Update every selected device; print one row per device."""
    _, devices = selected_devices(args)
    if not devices:
        raise ConfigError("no device matches the selection", hint="see `hilbench fleet list`")
    store = open_store(args)
    manifest = store.resolve(args.model)
    timings = {d.name: timing_named(str(d.settings.get("ota_timing", "lan"))) for d in devices}
    with out.status(f"updating {len(devices)} device(s) to {manifest['name']}@{manifest['version']}…"):
        results = asyncio.run(_update_all(devices, store, manifest, timings, args.delta))
    if args.json:
        emit_json({"model": manifest, "devices": [r.to_json() for r in results]})
    else:
        _print(results)
    return ExitCode.OK if all(r.ok for r in results) else ExitCode.FAILED


async def _update_all(
    devices: list[Device], store: ModelStore, manifest: dict, timings: dict[str, LinkTiming], delta: bool
) -> list[DeviceUpdate]:
    hosts = [str(d.settings.get("ota_server_host", "127.0.0.1")) for d in devices]
    async with UpdateServer(store, host=bind_address(hosts)) as server, virtual_fleet(devices) as (resolved, _):
        return list(
            await asyncio.gather(*(_update_one(d, store, server, manifest, timings[d.name], delta) for d in resolved))
        )


async def _update_one(
    device: Device, store: ModelStore, server: UpdateServer, manifest: dict, timing: LinkTiming, delta: bool
) -> DeviceUpdate:
    from bench.agent.session import AgentSession

    if not has_driver(device.kind):
        return DeviceUpdate(device.name, detail=f"no driver for kind {device.kind}")
    driver = driver_for(device)
    try:
        session = await AgentSession.open(await driver.open_agent(), device=device.name)
    except BenchError as exc:
        await driver.close_agent()
        return DeviceUpdate(device.name, detail=f"cannot reach the agent: {exc}")
    try:
        host = str(device.settings.get("ota_server_host", "127.0.0.1"))
        return await update_device(session, store, server, manifest, server_host=host, timing=timing, want_delta=delta)
    finally:
        await session.close()
        await driver.close_agent()


def _version(model: dict | None) -> str:
    return f"v{model.get('version')}" if model else "none"


def _print(results: list[DeviceUpdate]) -> None:
    table = Table(title="model update")
    for col in ("device", "result", "mode", "blocks", "bytes", "retx", "transfer ms", "saved", "verify ms",
                "switch ms", "running"):  # fmt: skip
        table.add_column(col, justify="right" if col not in ("device", "result", "mode", "running") else "left")
    for r in results:
        if r.ok:
            verdict = "[green]updated[/green]"
        elif r.kept_previous:
            verdict = "[red]FAILED[/red] (previous model kept)"
        else:
            verdict = "[red]FAILED[/red] [bold red](model changed!)[/bold red]"
        table.add_row(
            r.device, verdict, "delta" if r.delta else "full", str(r.blocks), str(r.bytes), str(r.retransmits),
            f"{r.transfer_ms:.1f}", str(r.delta_saved), f"{r.verify_ms:.1f}", f"{r.switch_ms:.2f}",
            f"{_version(r.previous)} -> {_version(r.running)}",
        )  # fmt: skip
    out.print(table)
    for r in results:
        for line in ([r.detail] if r.detail else []) + r.notes:
            out.print(f"  {r.device}: {line}", highlight=False)

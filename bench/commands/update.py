"""`hilbench update`: push a model version to the selected devices over CoAP, concurrently."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from bench.commands import (
    add_device_options,
    add_fleet_options,
    held_devices,
    results_at,
    selected_devices,
)
from bench.commands.model import add_store_option, open_store
from bench.commands.values import float_in
from bench.core.console import compact_table, emit_json, out
from bench.core.errors import ConfigError
from bench.core.outcomes import exit_code
from bench.core.stopping import run_stoppable
from bench.lab.acquire import reachable_devices
from bench.ota.impair import Impairment
from bench.ota.rollout import DeviceUpdate, manifests_for, update_devices
from bench.ota.timing import timing_named
from bench.store.results import open_store as open_results


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `update` command."""
    p = sub.add_parser("update", help="update the model on the selected devices over CoAP (exit 1 if any failed)")
    add_fleet_options(p, results="results store the device health goes to")
    p.add_argument("--model", required=True, metavar="NAME[@VERSION]", help="published model (default: latest)")
    p.add_argument("--delta", action="store_true", help="send a bsdiff4 delta where the device's model allows")
    p.add_argument(
        "--allow-downgrade",
        action="store_true",
        help="let devices install a version older than theirs, or a model of another name (refused otherwise)",
    )
    p.add_argument(
        "--loss",
        type=float_in(0.0, 50.0),
        default=0.0,
        metavar="PCT",  # the proxy drops at most half
        help="drop PCT %% of datagrams, 0-50 (loopback impairment proxy)",
    )
    add_store_option(p)
    add_device_options(p)
    p.set_defaults(func=cmd_update)


def cmd_update(args: argparse.Namespace) -> int:
    """Update every selected device; print one row per device."""
    fleet, devices = selected_devices(args)
    if not devices:
        raise ConfigError("no device matches the selection", hint="see `hilbench fleet list`")
    store = open_store(args)
    manifests = manifests_for(devices, store, args.model)  # a missing model or format stops us before any device
    for d in devices:
        timing_named(d.settings.ota_timing)
    impairment = Impairment(loss=args.loss / 100) if args.loss else None
    label = args.model
    health_store = results_at(args, fleet)
    with (
        held_devices(devices, "update", args.lease_wait),
        out.status(f"updating {len(devices)} device(s) to {label}…") as status,
    ):
        done: list[str] = []

        def on_done(r: DeviceUpdate) -> None:
            done.append(r.device)
            status.update(f"updating to {label}: {len(done)}/{len(devices)} done (last: {r.device})")

        results = run_stoppable(
            _run(devices, store, args.model, args.delta, args.allow_downgrade, impairment, on_done, health_store)
        )
    if args.json:
        emit_json({"model": args.model, "manifests": manifests, "devices": [r.to_json() for r in results]})
    else:
        _print(results)
    return exit_code(r.outcome for r in results)


async def _run(
    devices, store, spec, delta, allow_downgrade, impairment, on_done, health_store: str | Path
) -> list[DeviceUpdate]:
    """Update the devices; one that does not answer is recovered by the ladder first (recorded in the results
    store's device health, as the nightly's)."""
    with contextlib.closing(open_results(health_store)) as results:
        async with reachable_devices(devices) as (resolved, _):
            return await update_devices(
                resolved,
                store,
                spec,
                want_delta=delta,
                allow_downgrade=allow_downgrade,
                impairment=impairment,
                on_done=on_done,
                results=results,
            )


def _version(model: dict | None) -> str:
    return f"v{model.get('version')}" if model else "none"


def _print(results: list[DeviceUpdate]) -> None:
    table = compact_table("model update", caption="bytes: sent (rtx: retransmits); saved: bytes a delta did not send")
    for col in ("device", "result", "bytes", "rtx", "xfer ms", "saved", "verify ms", "switch ms"):
        table.add_column(col, no_wrap=col != "result", justify="left" if col in ("device", "result") else "right")
    for r in results:
        change = f"{_version(r.previous)}->{_version(r.running)}"
        if r.ok:
            verdict = f"[green]ok[/green] {'delta' if r.delta else 'full'} {change}"
        elif r.kept_previous:
            verdict = f"[red]FAILED[/red] kept {_version(r.running)}"
        elif not r.checked:
            verdict = "[red]infrastructure[/red] unreached" if r.previous is None else "[bold red]FAILED unknown[/]"
        else:
            verdict = f"[bold red]FAILED {change}![/]"
        table.add_row(r.device, verdict, str(r.bytes), str(r.retransmits), f"{r.transfer_ms:.0f}", str(r.delta_saved),
                      f"{r.verify_ms:.1f}", f"{r.switch_ms:.2f}")  # fmt: skip
    out.print(table)
    for r in results:
        for line in ([r.detail] if r.detail else []) + r.notes:
            out.print(f"  {r.device}: {line}", highlight=False)

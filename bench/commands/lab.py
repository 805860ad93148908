"""`hilbench lab`: boards shared through a labgrid coordinator and exporters (the fleet's [lab] table)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from bench.commands import add_device_options, add_fleet_options, fleet_of, held_devices
from bench.config.fleet import Fleet, Link, SerialLink, SshLink
from bench.core.console import emit_json, err, out
from bench.core.errors import ConfigError, ExitCode
from bench.core.folders import write_file
from bench.core.identity import job_identity
from bench.core.stopping import StopSignals, run_stoppable
from bench.lab.client import LabClient
from bench.lab.exporter import exporter_config, host_devices
from bench.lab.janitor import sweep
from bench.lab.sync import fleet_tag, sync_places


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `lab` command group."""
    lab = sub.add_parser("lab", help="share boards between bench hosts through labgrid")
    lsub = lab.add_subparsers(dest="lab_command", required=True)

    command = functools.partial(_lab_command, lsub)
    p = command("sync", "create/update/remove the coordinator's places, matches and tags", cmd_sync)
    p.add_argument("--dry-run", action="store_true", help="only say what would change")
    p = command("exporter-config", "write the labgrid exporter YAML of one bench host", cmd_exporter_config)
    _bench_host(p, "bench host (the devices' lab_host)", "as served")
    p.add_argument("--virtual-urls", metavar="FILE", help="`hilbench virtual up --json` output of that host")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p = command("serve", "on a bench host: run its virtual devices and its labgrid exporter", cmd_serve)
    _bench_host(p, "this bench host's name (the devices' lab_host)", "loopback")
    p.add_argument("--config", metavar="FILE", help="where to write the exporter YAML (default: state folder)")
    add_device_options(p)
    command("places", "the fleet's places and who holds them", cmd_places)
    p = command("janitor", "release places whose holder job is gone", cmd_janitor)
    p.add_argument("--holder", action="append", default=[], metavar="HOST/USER", help="also release this holder's")
    p.add_argument("--dry-run", action="store_true", help="only say what would be released")


def _lab_command(lsub: argparse._SubParsersAction, name: str, summary: str, func: Callable) -> argparse.ArgumentParser:
    """Subcommand `name` of `hilbench lab`, over the whole fleet file (its [lab] table and every device)."""
    p = lsub.add_parser(name, help=summary)
    add_fleet_options(p, select=False)
    p.set_defaults(func=func)
    return p


def _bench_host(p: argparse.ArgumentParser, host: str, address_default: str) -> None:
    """--host (which bench host, by its exporter name) and --address (how other hosts reach it)."""
    p.add_argument("--host", required=True, metavar="NAME", help=host)
    p.add_argument(
        "--address", metavar="ADDR", help=f"address other hosts reach this one by (default: {address_default})"
    )


def _lab_fleet(args: argparse.Namespace) -> Fleet:
    fleet = fleet_of(args)
    if not fleet.lab.coordinator:
        raise ConfigError(f"{fleet.path}: no [lab] table", hint='add [lab] with coordinator = "HOST:20408"')
    return fleet


async def _with_client(fleet: Fleet, work, *, user: str | None = None):
    host, default_user = job_identity()
    async with LabClient(fleet.lab.coordinator, host, user or default_user) as client:
        return await work(client)


def cmd_sync(args: argparse.Namespace) -> int:
    """Sync places from the fleet file."""
    fleet = _lab_fleet(args)
    report = run_stoppable(_with_client(fleet, lambda c: sync_places(c, fleet, dry_run=args.dry_run)))
    if args.json:
        emit_json({"changed": report.actions, "skipped": report.skipped, "dry_run": args.dry_run})
    else:
        for line in report.actions:
            out.print(("would " if args.dry_run else "") + line, highlight=False)
        for line in report.skipped:
            out.print(f"[yellow]{line}[/yellow]", highlight=False)
        if not report.actions:
            out.print("places are in sync with the fleet file")
    return ExitCode.OK


def _served_links(path: str) -> dict[str, Link]:
    links: dict[str, Link] = {}
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"--virtual-urls {path}: cannot read: {exc.strerror}") from None
    for n, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
            urls = entry["urls"]
            if "rfc2217" in urls:
                links[entry["name"]] = SerialLink(urls["rfc2217"], 0)
            elif "ssh" in urls:
                user_host, _, port = urls["ssh"].removeprefix("ssh://").rpartition(":")
                user, _, host = user_host.partition("@")
                links[entry["name"]] = SshLink(user, host, int(port))
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"--virtual-urls {path}: line {n}: not a `hilbench virtual up --json` line") from None
    return links


def cmd_exporter_config(args: argparse.Namespace) -> int:
    """Print or write the exporter YAML of one bench host."""
    fleet = fleet_of(args)
    served = _served_links(args.virtual_urls) if args.virtual_urls else {}
    text = exporter_config(fleet, args.host, served, args.address)
    if args.output:
        write_file(Path(args.output), text, what="--output folder")
        out.print(f"wrote {args.output}; run: labgrid-exporter -c {fleet.lab.coordinator} -n {args.host} "
                  f"{args.output}")  # fmt: skip
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve one bench host until SIGINT/SIGTERM."""
    from bench.core.paths import state_dir
    from bench.lab.serve import serve_host

    fleet = _lab_fleet(args)
    config = Path(args.config) if args.config else state_dir() / f"exporter-{args.host}.yaml"

    def ready(urls: dict[str, str]) -> None:
        if args.json:  # a server's stdout is JSON lines, one per event
            sys.stdout.write(json.dumps({"host": args.host, "config": str(config), "devices": urls}) + "\n")
        else:
            for name, url in urls.items():
                out.print(f"[bold]{name}[/bold] {url}", highlight=False)
            out.print(f"exporter {args.host} -> {fleet.lab.coordinator} ({config}); Ctrl-C to stop")
        sys.stdout.flush()

    def warn(line: str) -> None:
        err.print(f"[yellow]warning:[/yellow] {line}", highlight=False)

    async def run() -> None:
        with StopSignals() as stop:
            await serve_host(fleet, args.host, config, stop.event, address=args.address, on_ready=ready, warn=warn)
            stop.raise_if_stopped()

    served = [replace(d, lab=None) for d in host_devices(fleet, args.host) if d.virtual]
    with held_devices(served, "lab serve", args.lease_wait):
        asyncio.run(run())
    return ExitCode.OK


def cmd_places(args: argparse.Namespace) -> int:
    """List the fleet's places."""
    fleet = _lab_fleet(args)

    async def work(client: LabClient):
        await client.refresh()
        return client.places(), list(client.resources())

    places, resources = run_stoppable(_with_client(fleet, work))
    tag = fleet_tag(fleet)
    mine = {n: p for n, p in sorted(places.items()) if p.tags.get("hb_fleet") == tag}
    if args.json:
        emit_json({n: {"tags": p.tags, "matches": list(p.matches), "acquired": p.acquired} for n, p in mine.items()})
        return ExitCode.OK
    table = Table(title=f"places of {fleet.path.name} on {fleet.lab.coordinator}")
    for col in ("place", "tags", "held by", "resources"):
        table.add_column(col)
    for name, p in mine.items():
        res = [f"{r.cls} {r.exporter}/{r.group}" + ("" if r.avail else " (away)") for r in resources
               if any(_matches(m, r.path) for m in p.matches)]  # fmt: skip
        tags = " ".join(f"{k}={v}" for k, v in sorted(p.tags.items()))
        table.add_row(name, tags, p.acquired or "-", "\n".join(res) or "[red]none[/red]")
    out.print(table)
    return ExitCode.OK


def _matches(pattern: str, path: tuple[str, str, str, str]) -> bool:
    from fnmatch import fnmatchcase

    parts = pattern.split("/")
    return all(fnmatchcase(value, pat) for value, pat in zip(path, parts, strict=False))


def cmd_janitor(args: argparse.Namespace) -> int:
    """Release dead jobs' places."""
    fleet = _lab_fleet(args)
    user = f"hb-janitor-{os.getpid()}"
    report = run_stoppable(
        _with_client(fleet, lambda c: sweep(c, fleet_tag(fleet), tuple(args.holder), args.dry_run), user=user)
    )
    if args.json:
        released = [{"place": p, "holder": h} for p, h in report.released]
        kept = [{"place": p, "holder": h, "why": w} for p, h, w in report.kept]
        emit_json({"released": released, "kept": kept, "dry_run": args.dry_run})
    else:
        for place, holder in report.released:
            out.print(f"{'would release' if args.dry_run else 'released'} {place} (held by {holder})", highlight=False)
        for place, holder, why in report.kept:
            out.print(f"kept {place}: held by {holder} ({why})", highlight=False)
        if not report.released and not report.kept:
            out.print("no place of this fleet is held")
    return ExitCode.OK

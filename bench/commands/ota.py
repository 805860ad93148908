"""`hilbench ota serve`: run the CoAP update server alone."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from bench.commands.model import add_store_option, open_store
from bench.commands.values import port
from bench.core.console import err, out
from bench.core.errors import ExitCode
from bench.core.stopping import StopSignals
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `ota` command group."""
    ota = sub.add_parser("ota", help="the CoAP model update server")
    osub = ota.add_subparsers(dest="ota_command", required=True)
    p = osub.add_parser("serve", help="serve the model store over CoAP (block-wise, resumable) until interrupted")
    add_store_option(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=5683, help="UDP port (default: 5683; 0 picks a free one)")
    p.add_argument("--json", action="store_true", help="print one JSON line {url, models} once listening")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT, SIGTERM or SIGHUP (exit 128 + the signal, as every command)."""
    asyncio.run(_serve(args))
    return ExitCode.OK


async def _serve(args: argparse.Namespace) -> None:
    store = open_store(args)
    with StopSignals() as stop:
        await _serve_until(args, store, stop)
        err.print("update server stopped")
        stop.raise_if_stopped()


async def _serve_until(args: argparse.Namespace, store: ModelStore, stop: StopSignals) -> None:
    async with UpdateServer(store, args.host, args.port) as server:
        models = [
            {
                **row,
                "url": server.model_url(row["name"], row["version"], fmt=row["format"]),
                "manifest_url": server.model_url(row["name"], row["version"], fmt=row["format"]) + "/manifest",
            }
            for row in store.listing()
        ]
        if args.json:
            sys.stdout.write(json.dumps({"url": server.base_url, "store": str(store.root), "models": models}) + "\n")
            sys.stdout.flush()
        else:
            out.print(f"update server on {server.base_url} (store {store.root}); Ctrl-C stops it")
            for m in models:
                out.print(f"  {m['url']}  {m['format']} {m['size']} B  sha256 {m['sha256'][:16]}…")
            if not models:
                out.print("  (no models yet: `hilbench model publish MODEL --key KEY`)")
        await stop.wait()

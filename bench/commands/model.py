"""`hilbench model publish|list`: sign model versions into the OTA store, with deltas."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from bench.commands.model_fixtures import add_fixture_commands
from bench.commands.values import int_in
from bench.core.console import emit_json, out
from bench.core.errors import ExitCode
from bench.models import guess_name_and_format
from bench.models.shape import check_model
from bench.models.signing import load_private_key
from bench.ota.store import MAX_VERSION, ModelStore, default_store_dir


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """--store DIR (default: bench.ota.store.default_store_dir)."""
    store_help = "model store directory (default: $HILBENCH_OTA_STORE, else ota-store in the bench cache)"
    parser.add_argument("--store", metavar="DIR", help=store_help)


def open_store(args: argparse.Namespace) -> ModelStore:
    """The store named by --store, or the default one."""
    return ModelStore(Path(args.store) if args.store else default_store_dir())


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `model` command group."""
    model = sub.add_parser("model", help="signed model versions for over-the-air updates")
    msub = model.add_subparsers(dest="model_command", required=True)
    p = msub.add_parser("publish", help="sign and store a model version, with a delta from the previous one")
    p.add_argument("model", metavar="MODEL", help="model file (.tflite, .npcm)")
    p.add_argument("--key", required=True, metavar="KEY", help="ECDSA-P256 private key (PEM)")
    p.add_argument("--name", help="model name (default: from the file name, e.g. npc-policy)")
    p.add_argument("--format", dest="fmt", help="model format (default: from the file, e.g. tflite-int8)")
    p.add_argument("--version", type=int_in(1, MAX_VERSION), metavar="N",
                   help=f"version number, 1-{MAX_VERSION} (default: the latest + 1)")  # fmt: skip
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_publish)
    p = msub.add_parser("list", help="list the published versions and their deltas")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_list)
    add_fixture_commands(msub)


def cmd_publish(args: argparse.Namespace) -> int:
    """Sign MODEL with KEY and store it."""
    path = Path(args.model)
    name, fmt = guess_name_and_format(path) if not (args.name and args.fmt) else (args.name, args.fmt)
    check_model(path, args.fmt or fmt)  # parsed and shape-checked before it is signed
    store = open_store(args)
    published = store.publish(
        path, load_private_key(Path(args.key)), name=args.name or name, fmt=args.fmt or fmt, version=args.version
    )
    m, delta = published.manifest, published.delta
    if args.json:
        emit_json({"store": str(store.root), "manifest": m, "delta": delta})
        return ExitCode.OK
    out.print(f"published {m['name']}@{m['version']} ({m['format']}, {m['size']} B, sha256 {m['sha256'][:16]}…)")
    if delta:
        ratio = delta["patch_size"] / m["size"] if m["size"] else 1.0
        than = f"{100 * (1 - ratio):.0f}% smaller" if ratio < 1 else f"{100 * (ratio - 1):.0f}% larger"
        out.print(f"  delta from @{delta['base_version']}: {delta['patch_size']} B ({than} than the model)")
    out.print(f"  store {store.root}")
    return ExitCode.OK


def cmd_list(args: argparse.Namespace) -> int:
    """Print every published version."""
    store = open_store(args)
    rows = store.listing()
    if args.json:
        emit_json({"store": str(store.root), "models": rows})
        return ExitCode.OK
    table = Table(title=f"model store {store.root}")
    for col in ("name", "version", "format", "size", "sha256", "deltas"):
        table.add_column(col)
    for r in rows:
        deltas = ", ".join(f"@{d['base_version']} {d['algo']} {d['patch_size']} B" for d in r["deltas"]) or "-"
        table.add_row(r["name"], str(r["version"]), r["format"], str(r["size"]), r["sha256"][:16], deltas)
    out.print(table)
    return ExitCode.OK

"""`hilbench model fixtures|convert|check-fixtures`: the fixture models and the .npcm converter."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from rich.table import Table

from bench.config.kinds import KINDS
from bench.core.console import emit_json, out
from bench.core.errors import ConfigError, ExitCode
from bench.core.folders import write_file
from bench.models import MODELS_DIR, npcm
from bench.models.catalogue import build_all
from bench.models.tflite_read import read_int8_policy


def add_fixture_commands(msub: argparse._SubParsersAction) -> None:
    """Add `fixtures`, `convert` and `check-fixtures` to the `model` command group."""
    p = msub.add_parser("fixtures", help="list the fixture model files with size, sha256 and the kinds that use them")
    p.add_argument("--dir", type=Path, default=MODELS_DIR, help="model folder (default: fixtures/models)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_list)
    p = msub.add_parser("convert", help="convert an int8 policy .tflite to the microcontroller's .npcm format")
    p.add_argument("tflite", type=Path)
    p.add_argument("npcm", type=Path)
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_convert)
    p = msub.add_parser("check-fixtures", help="rebuild the fixtures in memory; exit 1 if a committed file differs")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_check)


def _layers(path: Path) -> str:
    try:
        if path.suffix == ".npcm":
            widths = npcm.decode(path.read_bytes(), str(path)).mlp.widths
        else:
            widths = read_int8_policy(path).mlp.widths
    except ConfigError:
        return "-"
    return "-".join(str(w) for w in widths)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every .tflite/.npcm in the folder."""
    if not args.dir.is_dir():
        raise ConfigError(f"model folder {args.dir} does not exist")
    users: dict[str, list[str]] = {}
    for kind in KINDS.values():
        users.setdefault(kind.defaults().model, []).append(kind.name)
    rows = []
    for path in sorted([*args.dir.glob("*.tflite"), *args.dir.glob("*.npcm")]):
        data = path.read_bytes()
        rows.append(
            {
                "file": path.name,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "layers": _layers(path),
                "kinds": users.get(path.stem, []),
            }
        )
    if args.json:
        emit_json(rows)
        return ExitCode.OK
    table = Table("bytes", "sha256", "layers (int8)", "default for")
    table.add_column("file", no_wrap=True)
    for r in rows:
        table.add_row(str(r["size"]), r["sha256"][:12], r["layers"], ", ".join(r["kinds"]), r["file"])
    out.print(table)
    return ExitCode.OK


def cmd_convert(args: argparse.Namespace) -> int:
    """Write the .npcm form of an int8 .tflite."""
    data = npcm.convert(args.tflite)
    try:
        if not args.npcm.parent.is_dir():  # made by the user, not by the bench
            raise FileNotFoundError(2, "No such folder")
        write_file(args.npcm, data, what="output folder")
    except OSError as exc:
        hint = "give a writable path in a folder that exists"
        raise ConfigError(f"{args.npcm}: cannot write: {exc.strerror}", hint=hint, file=str(args.npcm)) from None
    result = {"npcm": str(args.npcm), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if args.json:
        emit_json(result)
    else:
        out.print(f"{args.npcm}: {len(data)} bytes, sha256 {result['sha256']}")
    return ExitCode.OK


def cmd_check(args: argparse.Namespace) -> int:
    """Compare the committed fixtures with a fresh build."""
    stale = [name for name, data in build_all().items() if _read(MODELS_DIR / name) != data]
    if args.json:
        emit_json({"stale": stale})
    elif stale:
        out.print(f"[red]stale:[/red] {', '.join(stale)} (run python fixtures/models/generate.py)")
    else:
        out.print("fixture models are up to date")
    return ExitCode.FAILED if stale else ExitCode.OK


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None

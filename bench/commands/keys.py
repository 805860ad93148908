"""`hilbench keys gen`: make an ECDSA-P256 model-signing key pair."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from bench.core.console import emit_json, out
from bench.core.errors import ConfigError, ExitCode
from bench.models.signing import generate_key, public_key_raw, save_key_pair

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `keys` command group."""
    keys = sub.add_parser("keys", help="model-signing keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    p = ksub.add_parser("gen", help="make an ECDSA-P256 key pair (NAME.key.pem, NAME.pub.pem)")
    p.add_argument("--out", default=".", metavar="DIR", help="directory for the two files (default: .)")
    p.add_argument("--name", default="model-signing", help="file name stem (default: model-signing)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_gen)


def cmd_gen(args: argparse.Namespace) -> int:
    """Write a new key pair; refuse to overwrite one unless --force."""
    if not _PLAIN.match(args.name):
        raise ConfigError(f"--name {args.name!r}: a file name stem (letters, digits, '.', '_', '-'; no '/')",
                          hint="put the files elsewhere with --out DIR")  # fmt: skip
    out_dir = Path(args.out)
    private, public = out_dir / f"{args.name}.key.pem", out_dir / f"{args.name}.pub.pem"
    for path in (private, public):
        if os.path.lexists(path) and not args.force:  # a dangling symbolic link counts too
            raise ConfigError(f"{path} exists", hint="pick another --name or --out, or pass --force")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        key = generate_key()
        save_key_pair(key, private, public)
    except OSError as exc:
        raise ConfigError(f"cannot write keys to {out_dir}: {exc.strerror}") from None
    raw = public_key_raw(key.public_key()).hex()
    if args.json:
        emit_json({"private": str(private), "public": str(public), "public_raw": raw})
    else:
        out.print(f"private key  {private}  (keep it secret; mode 0600)")
        out.print(f"public key   {public}")
        out.print(f"raw X||Y     {raw}  (the MicroPython agent's trusted key)")
    return ExitCode.OK

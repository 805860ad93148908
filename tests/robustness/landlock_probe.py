"""Run confined by `python -m bench.core.landlock` in test_sandbox: try what a sandboxed board must not do."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str) -> None:
    with open(path, "w") as f:
        f.write("x")


def _try(fn) -> str:
    try:
        fn()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"refused: {type(exc).__name__}"
    return "allowed"


def main() -> int:
    """Print one JSON object: each attempt and whether the kernel allowed it."""
    inside = sys.argv[1]
    outside = sys.argv[2]
    result = {
        "write inside": _try(lambda: _write(os.path.join(inside, "ok.txt"))),
        "read inside": _try(lambda: _read(os.path.join(inside, "ok.txt"))),
        "read outside": _try(lambda: _read(outside)),
        "read via ..": _try(lambda: _read(os.path.join(inside, "..", os.path.basename(outside)))),
        "write outside": _try(lambda: _write(outside + ".new")),
        "spawn": _try(lambda: subprocess.run(["/bin/true"], check=True)),
        "tcp connect": _try(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[3])), 2).close()),
    }
    print(json.dumps(result))
    return 0

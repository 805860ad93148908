"""Files in caches that several bench processes share (parallel test workers, two bench runs): written
whole or not at all, and built by one process while the others wait for it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a reader sees the old file or the new one, never a part (rename in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_if_changed(path: Path, data: bytes) -> None:
    """`write_atomic` unless `path` already holds `data` (keeps its mtime, and readers undisturbed)."""
    if not path.is_file() or path.read_bytes() != data:
        write_atomic(path, data)


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Hold the lock of `target` (an exclusive flock on `.NAME.lock` beside it) while building it: a second
    process building the same thing waits, then finds it built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

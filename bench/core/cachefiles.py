"""Files in caches that several bench processes share (parallel test workers, two bench runs): written
whole or not at all, and built by one process while the others wait for it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from bench.core.folders import write_file


def write_if_changed(path: Path, data: bytes) -> None:
    """`write_file` (bench.core.folders) unless `path` already holds `data` (keeps its mtime, and readers
    undisturbed)."""
    if not path.is_file() or path.read_bytes() != data:
        write_file(path, data, what="cache folder")


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Hold the lock of `target` (an exclusive flock on `.NAME.lock` beside it) while building it: a second
    process building the same thing waits, then finds it built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target.parent / f".{target.name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "r+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    """A file's sha256, hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()

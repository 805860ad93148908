"""Files in caches that several bench processes share (parallel test workers, two bench runs): written
whole or not at all, and built by one process while the others wait for it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so a reader sees the old file or the new one, never a part: a new temp file
    beside it (O_EXCL|O_NOFOLLOW, created with `mode`), renamed over `path`. Nothing is written through a
    symbolic link, neither one planted at the temp name nor one at `path` (the rename replaces the link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_if_changed(path: Path, data: bytes) -> None:
    """`write_atomic` unless `path` already holds `data` (keeps its mtime, and readers undisturbed)."""
    if not path.is_file() or path.read_bytes() != data:
        write_atomic(path, data)


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

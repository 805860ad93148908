"""A byte-reproducible initramfs archive (cpio "newc") written from a folder, without the cpio tool.

Entries are sorted, owned by root, stamped with one mtime and numbered in order, so the same folder
always gives the same bytes. Device nodes the kernel needs before devtmpfs (/dev/console) are added
as entries, so building needs no root and no mknod.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from bench.core.errors import BenchError
from bench.image.recipe import Recipe

_CHUNK = 1 << 20


def _header(ino: int, mode: int, nlink: int, mtime: int, size: int, name: bytes, rdev: tuple[int, int]) -> bytes:
    fields = (ino, mode, 0, 0, nlink, mtime, size, 0, 0, rdev[0], rdev[1], len(name) + 1, 0)
    head = b"070701" + b"".join(b"%08x" % f for f in fields) + name + b"\0"
    return head + b"\0" * (-len(head) % 4)


def _walk(root: Path) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            yield name if rel == "." else f"{rel}/{name}"


def write_cpio(root: Path, out: BinaryIO, mtime: int, char_devices: dict[str, tuple[int, int]]) -> int:
    """Archive every file, folder and symlink under `root` plus `char_devices` (path -> major, minor).

    Returns the number of entries written."""
    names = sorted(set(_walk(root)) | set(char_devices))
    ino = 0
    for ino, name in enumerate(names, start=1):
        if name in char_devices:
            out.write(_header(ino, stat.S_IFCHR | 0o600, 1, mtime, 0, name.encode(), char_devices[name]))
            continue
        path = root / name
        st = path.lstat()
        perm = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            data = os.readlink(path).encode()
            out.write(_header(ino, stat.S_IFLNK | 0o777, 1, mtime, len(data), name.encode(), (0, 0)))
            out.write(data + b"\0" * (-len(data) % 4))
        elif stat.S_ISDIR(st.st_mode):
            out.write(_header(ino, stat.S_IFDIR | perm, 2, mtime, 0, name.encode(), (0, 0)))
        elif stat.S_ISREG(st.st_mode):
            out.write(_header(ino, stat.S_IFREG | perm, 1, mtime, st.st_size, name.encode(), (0, 0)))
            with path.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)
            out.write(b"\0" * (-st.st_size % 4))
    out.write(_header(0, 0, 1, 0, 0, b"TRAILER!!!", (0, 0)))
    return ino


def write_archive(recipe: Recipe, root_dir: Path, dest: Path) -> None:
    """The initramfs at `dest`: `root_dir` as a cpio, compressed as the recipe says (lz4 legacy frame)."""
    raw = dest.with_suffix(".cpio")
    with raw.open("wb") as out:
        write_cpio(root_dir, out, recipe.source_date_epoch, {"dev/console": (5, 1), "dev/null": (1, 3)})
    if recipe.compression == "none":
        raw.rename(dest)
        return
    try:
        proc = subprocess.run(["lz4", "-l", "-q", "-f", str(raw), str(dest)], capture_output=True, text=True)
    except FileNotFoundError:
        raise BenchError("lz4 is not installed", hint="apt-get install lz4 (or set compression = 'none')") from None
    if proc.returncode != 0:
        raise BenchError(f"lz4 failed: {proc.stderr.strip()}")
    raw.unlink()

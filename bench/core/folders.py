"""The one home of the checks on folders the bench trusts (caches, leases, state, scratch): made by the bench
with mode 0700, and checked each time they are used. A folder that is a symbolic link, is owned by another
user or that others may write to is refused with a named error (exit 2): whoever can write there could plant
what the bench then loads, or point a file the bench writes somewhere else."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from bench.core.errors import ConfigError


class UnsafeFolder(ConfigError):
    """A folder the bench trusts is not the bench user's own (exit 2)."""


def own_folder(path: Path, what: str, *, private: bool = False) -> Path:
    """`path`, made (mode 0700, parents as needed) when missing, then checked: a real folder (no symbolic
    link), owned by this user, writable by nobody else; with `private` (a folder in a shared place such as
    /tmp) also closed to others (0700). An UnsafeFolder naming `what` and the folder otherwise."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot make the folder: {exc.strerror or exc}", file=str(path)) from None
    check_folder(path, what, private=private)
    return path


def check_folder(path: Path, what: str, *, private: bool = False) -> None:
    """Refuse `path` unless it is a real folder owned by this user that nobody else can write to; with
    `private`, one that others could still read is closed to 0700."""
    hint = f"remove it (or move it away) and let the bench make it again, mode 0700; or point {what} elsewhere"
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}", file=str(path)) from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolder(f"{what} {path} is a symbolic link, not a folder", hint=hint, file=str(path))
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolder(f"{what} {path} is not a folder", hint=hint, file=str(path))
    if st.st_uid != os.geteuid():
        raise UnsafeFolder(
            f"{what} {path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})",
            hint=hint,
            file=str(path),
        )
    if st.st_mode & 0o022:
        raise UnsafeFolder(
            f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}: others can write to it",
            hint=hint,
            file=str(path),
        )
    if private and st.st_mode & 0o077:
        os.chmod(path, 0o700, follow_symlinks=False)  # only this user could write to it: safe to keep, now closed


def real_folder(path: Path, what: str) -> Path:
    """`path` made (with its parents) when missing, refused (UnsafeFolder) when it is a symbolic link or not a
    folder: for the folders the bench makes inside a folder its user named (a report's `runs/`), so a link
    planted there never leads its writes elsewhere."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o755)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a folder"
        raise UnsafeFolder(f"{what} {path} is {kind}", hint="remove it; the bench makes the folder itself",
                           file=str(path))  # fmt: skip
    return path

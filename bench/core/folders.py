"""The one home of the checks on folders the bench trusts and of every file it writes.

Folders the bench keeps (caches, leases, state, scratch) are made with mode 0700 and checked each time they
are used: a symbolic link, a folder owned by another user or one that others may write to is refused with a
named error (exit 2). Whoever can write there could plant what the bench then loads, or point a file the bench
writes somewhere else.

Every file the bench writes goes through here (`write_file`, `copy_file`, `open_append`, `open_fresh`): the
folder chain up to / is checked first (`check_chain`: no folder in it that another user owns or could swap),
a whole file is written to a new temp beside it (O_EXCL|O_NOFOLLOW) and renamed over its name, and a log is
opened with O_NOFOLLOW and refused unless it is a regular file of this user with one link. So nothing is
written through a planted link, into a planted file, or into a folder another user can swap."""

from __future__ import annotations

import contextlib
import functools
import grp
import os
import pwd
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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
    check_chain(Path(os.path.abspath(path)).parent, f"{what}'s parent")


def real_folder(path: Path, what: str) -> Path:
    """`path` made (with its parents) when missing, refused (UnsafeFolder) when it is a symbolic link, not a
    folder, or anywhere in a chain another user could swap: for the folders the bench makes inside a folder
    its user named (a report's `runs/`), so a link planted there never leads its writes elsewhere."""
    folder = safe_folder(path, what)
    if os.path.islink(path):
        raise UnsafeFolder(f"{what} {path} is a symbolic link", hint="remove it; the bench makes the folder itself",
                           file=str(path))  # fmt: skip
    return folder


_TRUSTED_HINT = (
    "write somewhere only you (or root) can change, e.g. a folder of your own under your home; "
    "or have its owner make it yours (chown) and close it to others (chmod go-w)"
)


def _refuse(what: str, folder: Path, why: str) -> UnsafeFolder:
    return UnsafeFolder(f"{what} {folder} {why}, so another user could swap what the bench writes there",
                        hint=_TRUSTED_HINT, file=str(folder))  # fmt: skip


def _trusted_uid(uid: int) -> bool:
    return uid in (0, os.geteuid())


@functools.cache
def _group_is_ours(gid: int) -> bool:
    """True when nobody but root and this user is in group `gid` (a user's own group, root's group)."""
    me = {0, os.geteuid()}
    try:
        names = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return gid in (0, os.getegid())
    others = (u for u in pwd.getpwall() if u.pw_uid not in me)
    return not any(u.pw_gid == gid or u.pw_name in names for u in others)


def _others_can_write(st: os.stat_result) -> bool:
    if st.st_mode & 0o002:
        return True
    return bool(st.st_mode & 0o020) and not _group_is_ours(st.st_gid)


def check_chain(folder: Path, what: str, *, _depth: int = 0) -> None:
    """Refuse `folder` (UnsafeFolder, exit 2) unless no other user could change what lands in it: each folder
    from / down to it is owned by root or this user, and none may be written by others unless it is sticky
    (as /tmp: nobody there renames what another user owns). A symbolic link on the way counts only when root
    or this user owns it; its target is checked the same way."""
    parts = Path(os.path.abspath(folder)).parts
    current = Path(parts[0])
    for name in (*parts[1:], None):
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return  # not made yet: whoever makes it (safe_folder) makes it in a checked parent
        except OSError as exc:
            raise _refuse(what, current, f"cannot be checked ({exc.strerror or exc})") from None
        if stat.S_ISLNK(st.st_mode):
            if not _trusted_uid(st.st_uid) or _depth > 8:
                raise _refuse(what, current, f"is a symbolic link of uid {st.st_uid}")
            current = Path(os.path.realpath(current))
            check_chain(current, what, _depth=_depth + 1)
            st = os.stat(current)
        elif not stat.S_ISDIR(st.st_mode):
            raise UnsafeFolder(f"{what} {current} is not a folder: cannot write there", hint="name a folder",
                               file=str(current))  # fmt: skip
        if not _trusted_uid(st.st_uid):
            raise _refuse(what, current, f"is owned by uid {st.st_uid}")
        if _others_can_write(st) and not st.st_mode & stat.S_ISVTX:  # sticky (/tmp): others cannot rename ours
            raise _refuse(what, current, f"has mode {stat.S_IMODE(st.st_mode):04o} (others may write to it)")
        if name is None:
            return
        current = current / name


def safe_folder(path: Path, what: str, mode: int = 0o755) -> Path:
    """`path` made (with its missing parents, `mode`) and its chain checked (`check_chain`)."""
    path = Path(os.path.abspath(path))
    check_chain(path, what)
    try:
        path.mkdir(mode=mode, parents=True, exist_ok=True)
    except FileExistsError:
        raise UnsafeFolder(f"{what} {path} is not a folder", hint="remove it, or name a folder",
                           file=str(path)) from None  # fmt: skip
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot make the folder: {exc.strerror or exc}", file=str(path)) from None
    check_chain(path, what)
    return path


@contextlib.contextmanager
def replacing(path: Path, what: str, mode: int = 0o644) -> Iterator[IO[bytes]]:
    """A new file beside `path` (O_EXCL|O_NOFOLLOW, `mode`) to write, renamed over `path` when the block ends
    well and removed when it does not; its folder chain checked first."""
    folder = safe_folder(path.parent, what)
    tmp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, folder / path.name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_file(path: Path, data: bytes | str, *, what: str = "output folder", mode: int = 0o644) -> None:
    """Write `data` (str: UTF-8) to `path` whole: a reader sees the old file or the new one, never a part,
    and nothing is written through a link or into a file planted at `path` (the rename replaces it)."""
    with replacing(Path(path), what, mode) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def copy_file(src: Path, dest: Path, *, what: str = "output folder", mode: int | None = None) -> None:
    """Copy `src` to `dest` as `write_file` writes (mode: `src`'s unless given)."""
    with open(src, "rb") as source:
        perms = mode or stat.S_IMODE(os.fstat(source.fileno()).st_mode)
        with replacing(Path(dest), what, perms) as fh:
            shutil.copyfileobj(source, fh, 1 << 20)


def _checked_fd(path: Path, what: str, flags: int, mode: int) -> int:
    folder = safe_folder(Path(path).parent, what)
    target = folder / Path(path).name
    try:
        fd = os.open(target, flags | os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, mode)
    except OSError as exc:  # ELOOP: a link planted at the name; EISDIR, ENXIO: a folder or FIFO
        raise UnsafeFolder(f"{what} {folder}: cannot write {target.name}: {exc.strerror or exc}",
                           hint=f"remove {target}; the bench makes it itself", file=str(target)) from None  # fmt: skip
    st = os.fstat(fd)
    why = ("is not a regular file" if not stat.S_ISREG(st.st_mode) else
           f"is owned by uid {st.st_uid}" if st.st_uid != os.geteuid() else
           f"has {st.st_nlink} hard links" if st.st_nlink != 1 else None)  # fmt: skip
    if why:
        os.close(fd)
        raise UnsafeFolder(f"{what} {folder}: {target.name} {why}, not a file the bench made",
                           hint=f"remove {target}; the bench makes it itself", file=str(target))  # fmt: skip
    os.set_blocking(fd, True)
    return fd


def append_fd(path: Path, *, what: str = "log folder", mode: int = 0o644) -> int:
    """A descriptor appending to `path` (made, `mode`, when missing): never through a link, never into a
    file another user planted or linked (refused: exit 2)."""
    return _checked_fd(path, what, os.O_APPEND | os.O_CREAT, mode)


def open_append(path: Path, *, what: str = "log folder", binary: bool = False) -> IO[Any]:
    """`path` opened to append, as `append_fd` opens it."""
    fd = append_fd(path, what=what)
    return os.fdopen(fd, "ab") if binary else os.fdopen(fd, "a", encoding="utf-8")


def open_fresh(path: Path, *, what: str = "log folder", binary: bool = False) -> IO[Any]:
    """`path` opened empty: what was at its name is removed (a link is removed, not followed) and a new file
    made (O_EXCL)."""
    folder = safe_folder(Path(path).parent, what)
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        (folder / Path(path).name).unlink()
    fd = _checked_fd(path, what, os.O_CREAT | os.O_EXCL, 0o644)
    return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")

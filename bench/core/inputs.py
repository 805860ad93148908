"""Files the bench reads from its users, checked before they are read: a regular file (a block device where
one is meant), opened without blocking (a FIFO never hangs a command), and no larger than its kind's limit
(a 1 GB file is refused before it is read). The one home of those checks and of the per-kind size limits."""

from __future__ import annotations

import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any, BinaryIO

from bench.core.errors import ConfigError

MiB = 1024 * 1024

LIMITS: dict[str, int] = {
    "fleet file": 1 * MiB,
    "thresholds file": 1 * MiB,
    "image recipe": 1 * MiB,
    "key": 64 * 1024,
    "model": 64 * MiB,
    "firmware": 32 * MiB,
    "session file": 4096 * MiB,
    "baseline file": 16 * MiB,
}
"""The largest file of each kind the bench reads (bytes). A session is streamed; its events are bounded by
`EVENT_LIMIT` in bench.replay.recording."""

_WHAT = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class InputError(ConfigError):
    """A file given to the bench cannot be used: missing, not a regular file, too large or unreadable."""

    def __init__(self, message: str, *, file: str | Path, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, file=str(file))


def _describe(mode: int) -> str:
    return _WHAT.get(stat.S_IFMT(mode), "not a regular file")


def check_file(path: str | Path, kind: str, *, block_device: bool = False, hint: str | None = None) -> os.stat_result:
    """The stat of `path` when it is a regular file (or a block device with `block_device`) within the limit
    of `kind`; an InputError naming the file and what it is otherwise. Never opens the file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{kind} {path} does not exist", file=path, hint=hint) from None
    except OSError as exc:
        raise InputError(f"{kind} {path}: cannot read: {exc.strerror}", file=path, hint=hint) from None
    if not (stat.S_ISREG(st.st_mode) or (block_device and stat.S_ISBLK(st.st_mode))):
        wanted = "a regular file or a block device" if block_device else "a regular file"
        raise InputError(f"{kind} {path} is {_describe(st.st_mode)}, not {wanted}", file=path, hint=hint)
    limit = LIMITS.get(kind)
    if limit is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise InputError(
            f"{kind} {path} is {st.st_size} bytes, over the {_size(limit)} limit for a {kind}", file=path, hint=hint
        )
    return st


def open_input(path: str | Path, kind: str, *, hint: str | None = None) -> BinaryIO:
    """`path` opened for reading, checked as `check_file` does. The open itself cannot block (O_NONBLOCK,
    then the opened file is checked again, so a FIFO swapped in after the check is refused too)."""
    check_file(path, kind, hint=hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{kind} {path}: cannot read: {exc.strerror}", file=path, hint=hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{kind} {path} is {_describe(st.st_mode)}, not a regular file", file=path, hint=hint)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: str | Path, kind: str, *, hint: str | None = None) -> bytes:
    """The bytes of `path` (a regular file within its kind's limit; never more than the limit is read)."""
    limit = LIMITS.get(kind)
    with open_input(path, kind, hint=hint) as fh:
        try:
            data = fh.read(limit + 1) if limit is not None else fh.read()
        except OSError as exc:
            raise InputError(f"{kind} {path}: cannot read: {exc.strerror}", file=path, hint=hint) from None
    if limit is not None and len(data) > limit:  # it grew after the check
        raise InputError(f"{kind} {path} is over the {_size(limit)} limit for a {kind}", file=path, hint=hint)
    return data


def read_input_text(path: str | Path, kind: str, *, hint: str | None = None) -> str:
    """The UTF-8 text of `path`, read as `read_input` does."""
    data = read_input(path, kind, hint=hint)
    try:
        return data.decode("utf-8-sig")  # a byte-order mark (Windows editors) is read past
    except UnicodeDecodeError:
        raise InputError(f"{kind} {path}: not UTF-8 text", file=path, hint=hint) from None


def load_toml(path: str | Path, kind: str, *, hint: str | None = None) -> dict[str, Any]:
    """A TOML file of `kind`, read as `read_input_text` does; a malformed, too deeply nested or non-finite
    (nan, inf) document is refused naming the file (and the field)."""
    return parse_toml(read_input_text(path, kind, hint=hint), path)


def parse_toml(text: str, path: str | Path) -> dict[str, Any]:
    """`text` (read from `path`) parsed as TOML, refused as `load_toml` refuses."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}", file=str(path)) from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply", file=str(path)) from None
    field = _non_finite(data, "")
    if field is not None:
        raise ConfigError(
            f"{path}: field {field!r}: not a finite number (nan and inf are refused)", file=str(path), field=field
        )
    return data


def _non_finite(value: Any, where: str) -> str | None:
    """The dotted name of the first nan/inf inside `value`, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where or "(top level)"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        name = f"{where}{key}" if str(key).startswith("[") else f"{where}.{key}" if where else str(key)
        found = _non_finite(item, name)
        if found is not None:
            return found
    return None


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"

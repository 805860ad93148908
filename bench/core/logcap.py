"""Every log the bench keeps is capped and rotated here, the one home for it.

A log grows to LOG_CAP bytes; the write that would pass that first renames it to NAME.1 (the NAME.1 before it is
dropped) and begins NAME again, so one log never takes more than twice LOG_CAP of disk, whatever a board, a guest
or a neighbour makes the bench write. A single write longer than the cap keeps its last LOG_CAP bytes. Logs the
bench writes itself go through `CappedLog` (`write` takes bytes or text); a log another program writes directly
(sshd's, Chromium's, the labgrid exporter's) is opened through `open_for_child`, which rotates it first when it is
over the cap, so it is capped at each start. Opens go through `bench.core.folders.append_fd`: the folder chain is
checked, and a link or another user's file at the log's name is UnsafeFolder (exit 2) naming the log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from bench.core.folders import append_fd

LOG_CAP = 4 * 1024 * 1024  # bytes one log file grows to before it is rotated
MODE = 0o640


def _open(path: Path, what: str) -> int:
    """The log's file, opened for appending through `append_fd` (no link, no planted file: exit 2)."""
    return append_fd(path, what=what, mode=MODE)


def _rotate(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, path.with_name(path.name + ".1"))


def open_for_child(path: Path, cap: int = LOG_CAP, *, what: str = "log folder") -> int:
    """A descriptor for a child process's log (its stdout/stderr, or a `-E` file), the log rotated first when it
    is over `cap`; the caller closes it once the child has it."""
    with contextlib.suppress(OSError):
        if os.lstat(path).st_size > cap:
            _rotate(path)
    return _open(path, what)


class CappedLog:
    """A log file the bench appends to, rotated at `cap` bytes; `on_reopen(fd)` is told each new descriptor."""

    def __init__(
        self,
        path: Path,
        cap: int = LOG_CAP,
        on_reopen: Callable[[int], None] | None = None,
        *,
        what: str = "log folder",
    ) -> None:
        self.path = path
        self.what = what
        self.cap = cap
        self.on_reopen = on_reopen
        self._fd = open_for_child(path, cap, what=what)
        if on_reopen is not None:
            on_reopen(self._fd)

    def write(self, data: bytes | str) -> int:
        """Append `data` (text as UTF-8), rotating first when it would take the log past the cap."""
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else bytes(data)
        if self._fd < 0 or not raw:
            return len(data)
        raw = raw[-self.cap :]
        if os.fstat(self._fd).st_size + len(raw) > self.cap:
            self._reopen()
        view = memoryview(raw)
        while view:
            view = view[os.write(self._fd, view) :]
        return len(data)

    def _reopen(self) -> None:
        _rotate(self.path)
        os.close(self._fd)
        self._fd = _open(self.path, self.what)
        if self.on_reopen is not None:
            self.on_reopen(self._fd)

    def flush(self) -> None:
        """Nothing is buffered: each write is the file's."""

    def fileno(self) -> int:
        """The current file's descriptor."""
        return self._fd

    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> CappedLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

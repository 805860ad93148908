"""A device's text console for tests: lines stamped on the bench clock as they arrive, `expect()` with a timeout
and patterns that must not appear, saved to a file.

It reads the consoles that already exist (see `Driver.follow_console` and `AgentSession.console_listeners`):
the serial REPL/log of an ESP32-C6, the Linux agent's stderr (its log over SSH), the QEMU serial console.
Lines are fed from the bench's event loop thread and waited for from the test's thread.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.core.folders import write_file

Pattern = str | re.Pattern[str]
TAIL_LINES = 12  # how many recent lines an expect failure shows


@dataclass(frozen=True)
class ConsoleLine:
    """One console line and when the bench received it (`time.monotonic_ns()`, the bench clock)."""

    t_ns: int
    source: str  # "agent": the agent link; "device": the device's own console (serial log, agent.log, QEMU)
    text: str

    def stamped(self) -> str:
        """The line as saved: bench-clock seconds, source, text."""
        return f"{self.t_ns / 1e9:.6f} {self.source:<6} {self.text}"


class ConsoleTimeout(AssertionError):
    """No console line matched within the timeout."""


class ConsoleForbidden(AssertionError):
    """A line matching a `not_matching` pattern appeared before the expected one."""


class DeviceConsole:
    """Every console line of one device in arrival order, with a cursor that `expect` moves past each match."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._lines: list[ConsoleLine] = []
        self._cond = threading.Condition()
        self.start = 0  # index of the current test's first line (`begin`)
        self.cursor = 0  # index of the first line `expect` looks at
        self.ended: str | None = None  # why no more lines will come (set when the device's agent is closed)

    def feed(self, text: str, source: str = "device") -> None:
        """Add a line (any thread)."""
        with self._cond:
            self._lines.append(ConsoleLine(time.monotonic_ns(), source, text))
            self._cond.notify_all()

    def begin(self) -> int:
        """A test starts: `lines()`, `text()` and `expect` see only what arrives from now on; returns the index."""
        with self._cond:
            self.start = self.cursor = len(self._lines)
        return self.start

    def lines(self, start: int | None = None) -> list[ConsoleLine]:
        """The lines from index `start` on (default: the current test's)."""
        with self._cond:
            return self._lines[self.start if start is None else start :]

    def text(self, start: int | None = None) -> list[str]:
        """The text of the lines from index `start` on (default: the current test's)."""
        return [line.text for line in self.lines(start)]

    def save(self, path: Path, start: int | None = None) -> Path:
        """Write the lines from `start` on (default: the current test's), stamped, to `path`."""
        write_file(path, "".join(line.stamped() + "\n" for line in self.lines(start)), what="console log folder")
        return path

    def expect(self, pattern: Pattern, timeout: float = 10.0, *, not_matching: Iterable[Pattern] = ()) -> re.Match[str]:
        """Wait for a line (at or after the cursor) that `pattern` (a regex) matches; return the match and move
        the cursor past that line. ConsoleForbidden as soon as a line matches one of `not_matching` first;
        ConsoleTimeout after `timeout` seconds."""
        __tracebackhide__ = True
        wanted = re.compile(pattern) if isinstance(pattern, str) else pattern
        return self._wait(wanted.search, wanted.pattern, timeout, not_matching)

    def expect_exact(self, text: str, timeout: float = 10.0, *, not_matching: Iterable[Pattern] = ()) -> re.Match[str]:
        """`expect` for a plain substring (no regex)."""
        __tracebackhide__ = True
        wanted = re.compile(re.escape(text))
        return self._wait(wanted.search, repr(text), timeout, not_matching)

    def _wait(self, search, what: str, timeout: float, not_matching: Iterable[Pattern]) -> re.Match[str]:
        __tracebackhide__ = True
        forbidden = [re.compile(p) if isinstance(p, str) else p for p in not_matching]
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                while self.cursor < len(self._lines):
                    line = self._lines[self.cursor]
                    self.cursor += 1
                    for bad in forbidden:
                        if bad.search(line.text):
                            raise ConsoleForbidden(
                                f"console of {self.device}: {line.text!r} matches forbidden {bad.pattern!r} "
                                f"before {what} appeared\n{self._tail()}"
                            )
                    if match := search(line.text):
                        return match
                left = deadline - time.monotonic()
                if left <= 0:
                    ended = f" (console ended: {self.ended})" if self.ended else ""
                    raise ConsoleTimeout(
                        f"console of {self.device}: no line matching {what} within {timeout:g} s{ended}\n{self._tail()}"
                    )
                self._cond.wait(left)

    def _tail(self) -> str:
        last = self._lines[max(self.start, len(self._lines) - TAIL_LINES) :]
        if not last:
            return "(the console printed nothing during this test)"
        return "last console lines:\n" + "\n".join(f"  {line.stamped()}" for line in last)

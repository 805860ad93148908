"""What a device's console says about a crash, in words a test report can show.

- A Python traceback (MicroPython on an ESP32-C6, CPython of a Linux or QEMU agent): each frame is mapped from
  the file name the device printed to the deployed source in this checkout, with that source line.
- A guest kernel panic, an agent that exited, was killed or reported a fault: the last console lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.core.paths import ROOT

TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>\S+))?')
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")
SIGNS = (
    re.compile(r"Kernel panic - not syncing"),
    re.compile(r"NPC-INIT agent-exit rc=(?!0 )"),
    re.compile(r"Out of memory|oom[-_]kill", re.IGNORECASE),
    re.compile(r"\[fault\] "),
    re.compile(r"Segmentation fault|core dumped|Aborted"),
    re.compile(r"Guru Meditation|abort\(\) was called|rst:0x"),
)
LAST_LINES = 20


@dataclass(frozen=True)
class StackFrame:
    """One traceback frame, as printed and as found in the checkout."""

    device_file: str
    line: int
    function: str
    source: Path | None  # the deployed file's source in this checkout, when known
    code: str  # that source line, stripped ("" when unknown)

    def describe(self) -> str:
        """`npc_agent.py:123 in run -> micropython/npc_agent.py:123: code`."""
        where = f"{self.device_file}:{self.line}" + (f" in {self.function}" if self.function else "")
        if self.source is None:
            return f"{where} (not a deployed agent file)"
        # sources are shown relative to the checkout (or the installed data folder)
        shown = self.source.relative_to(ROOT) if self.source.is_relative_to(ROOT) else self.source
        return f"{where} -> {shown}:{self.line}: {self.code}"


@dataclass(frozen=True)
class Crash:
    """A decoded crash: one line of summary, the mapped frames and the console lines around it."""

    device: str
    summary: str
    frames: tuple[StackFrame, ...]
    lines: tuple[str, ...]

    def text(self) -> str:
        """The crash as plain text for a report."""
        parts = [f"device {self.device}: {self.summary}"]
        if self.frames:
            parts.append("traceback, mapped to the deployed sources (innermost last):")
            parts += [f"  {f.describe()}" for f in self.frames]
        parts.append(f"last console lines ({len(self.lines)}):")
        parts += [f"  {line}" for line in self.lines]
        return "\n".join(parts)


def decode_crash(device: str, lines: Sequence[str], sources: Mapping[str, Path], why: str = "") -> Crash | None:
    """The last crash in `lines` (a traceback or another crash sign), or, when `why` says the agent is gone,
    its last lines; None when the console shows nothing wrong. `sources`: deployed file name -> source path."""
    tail = tuple(lines[-LAST_LINES:])
    start = max((i for i, text in enumerate(lines) if TRACEBACK in text), default=None)
    if start is not None:
        frames, exception = _traceback(lines[start + 1 :], sources)
        summary = exception or "a traceback without its exception line"
        context = tuple(lines[max(0, start - 3) : start + 2 + len(frames) * 2 + 1])
        return Crash(device, summary, frames, context if len(context) > len(tail) else tail)
    signs = [text for text in lines if any(p.search(text) for p in SIGNS)]
    if signs:
        return Crash(device, signs[-1].strip(), (), tail)
    if why:
        return Crash(device, why, (), tail)
    return None


def _traceback(lines: Sequence[str], sources: Mapping[str, Path]) -> tuple[tuple[StackFrame, ...], str]:
    frames: list[StackFrame] = []
    for text in lines:
        if match := _FRAME.match(text):
            frames.append(_frame(match["file"], int(match["line"]), match["func"] or "", sources))
        elif _EXCEPTION.match(text.strip()):
            return tuple(frames), text.strip()
        elif frames and text.startswith("    "):
            continue  # CPython prints the source line under each frame
        elif frames:
            break
    return tuple(frames), ""


def _frame(device_file: str, line: int, function: str, sources: Mapping[str, Path]) -> StackFrame:
    source = sources.get(device_file) or sources.get(device_file.lstrip("/")) or sources.get(Path(device_file).name)
    code = ""
    if source is not None:
        try:
            code = source.read_text(encoding="utf-8").splitlines()[line - 1].strip()
        except (OSError, IndexError, UnicodeDecodeError):
            code = "(line not in the source: was an older agent deployed?)"
    return StackFrame(device_file, line, function, source, code)

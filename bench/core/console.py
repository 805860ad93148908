"""Output helpers shared by the CLI commands: rich for people, JSON for machines.

On a terminal rich wraps and colours; to a pipe or a file nothing is wrapped (a log line stays one line) and
tables are laid out for 80 columns. `-q` silences notes and progress (`set_quiet`); errors are said anyway.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

TABLE_WIDTH = 80  # what a table must fit when the output is no terminal (the terminal's own width otherwise)


def _console(stream: Any, *, stderr: bool) -> Console:
    tty = stream.isatty() if hasattr(stream, "isatty") else False
    return Console(stderr=stderr, soft_wrap=not tty, width=None if tty else TABLE_WIDTH)


out = _console(sys.stdout, stderr=False)
err = _console(sys.stderr, stderr=True)


def set_quiet(quiet: bool) -> None:
    """-q: no notes and no progress on stderr (results on stdout and errors still print)."""
    err.quiet = quiet


def note(text: str) -> None:
    """One line for the person at the terminal on stderr (silenced by -q); not rich markup."""
    err.print(text, highlight=False, markup=False)


def shown(text: object) -> str:
    """`text` with its control characters shown, not sent: ESC, OSC, C1 codes, DEL and bidirectional overrides
    become `\\x1b`, `\\u202e`..., so a stored note can neither clear the screen nor write the clipboard."""
    return "".join(_visible(c) for c in str(text))


def _visible(c: str) -> str:
    category = unicodedata.category(c)
    if category == "Cc" or (category == "Cf" and unicodedata.bidirectional(c) in _BIDI):
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
    return c


_BIDI = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}


def plain(text: object) -> str:
    """`text` as plain words for rich (markup escaped: an owner of `[/red]` is printed, not parsed) with its
    control characters shown (`shown`)."""
    return escape(shown(text))


def compact_table(title: str | None = None, **kw: Any) -> Table:
    """The CLI's table: a rule under the headers, no frame, two spaces between columns (what fits 80 columns)."""
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), **kw)


def emit_json(data: Any) -> None:
    """Print `data` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()

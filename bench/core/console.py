"""Output helpers shared by the CLI commands: rich for people, JSON for machines.

On a terminal rich wraps and colours; to a pipe or a file nothing is wrapped (a log line stays one line) and
tables are laid out for 80 columns. `-q` silences notes and progress (`set_quiet`); errors are said anyway.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich import box
from rich.console import Console
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


def compact_table(title: str | None = None, **kw: Any) -> Table:
    """The CLI's table: a rule under the headers, no frame, two spaces between columns (what fits 80 columns)."""
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), **kw)


def emit_json(data: Any) -> None:
    """Print `data` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()

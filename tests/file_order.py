"""The order the test run hands its files to the pytest-xdist workers: the longest first, so that no long file
starts near the end while the other workers have run out of work (longest-processing-time-first).

A file's length is what one worker spent on it in a full run, kept in tests/file_seconds.toml. Files not listed
there (short ones, and new ones) come after the listed ones, in collection order. Refresh the list after a full
run: `python -m tests.file_order reports/junit.xml`. pytest-slow-first and pytest-slowest-first order tests by the
last run's durations in pytest's cache, which a fresh clone does not have, and they order tests, not files (a
file's tests share one worker here: `--dist loadfile`)."""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

import pytest

SECONDS_FILE = Path(__file__).with_name("file_seconds.toml")
LISTED_FROM_S = 3.0  # a file shorter than this in the run is left out of the list
HEADER = """\
# Seconds one pytest-xdist worker spent on each test file in a full run (at least {least:g} s), longest first: the
# run hands out the longest files first (tests/file_order.py). Written by `python -m tests.file_order JUNIT_XML`.
"""


def file_seconds(path: Path = SECONDS_FILE) -> dict[str, float]:
    """{test file, relative to the repository: seconds} from the list (empty when there is none)."""
    if not path.is_file():
        return {}
    return {str(name): float(s) for name, s in tomllib.loads(path.read_text(encoding="utf-8"))["seconds"].items()}


def longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Reorder `items` in place: files by their listed seconds, longest first; a file's tests stay in their order."""
    rank = {name: i for i, name in enumerate(sorted(seconds, key=lambda n: -seconds[n]))}
    unlisted = len(rank)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], unlisted))


def seconds_from_junit(junit: Path) -> dict[str, float]:
    """{test file: seconds of its test cases} from a JUnit XML report of a run (pytest's --junitxml)."""
    total: Counter[str] = Counter()
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = [p for p in parts if not p[:1].isupper()]  # drop a test class's name
        total["/".join(module) + ".py"] += float(case.get("time") or 0)
    return dict(total)


def render(seconds: dict[str, float]) -> str:
    """The list's TOML text: the files of at least LISTED_FROM_S, longest first, whole seconds."""
    lines = [HEADER.format(least=LISTED_FROM_S), "[seconds]"]
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        if s >= LISTED_FROM_S:
            lines.append(f'"{name}" = {round(s)}')
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write tests/file_seconds.toml from a full run's JUnit XML report."""
    parser = argparse.ArgumentParser(prog="python -m tests.file_order", description=main.__doc__)
    parser.add_argument("junit", type=Path, help="the run's JUnit XML report (reports/junit.xml)")
    args = parser.parse_args(argv)
    try:
        seconds = seconds_from_junit(args.junit)
    except (OSError, ElementTree.ParseError) as exc:
        print(f"error: {args.junit}: not a readable JUnit XML report ({exc})", file=sys.stderr)
        return 2
    if not seconds:
        print(f"error: {args.junit}: no test cases in it; give a full run's report", file=sys.stderr)
        return 2
    SECONDS_FILE.write_text(render(seconds), encoding="utf-8")
    print(f"wrote {SECONDS_FILE}: {sum(s >= LISTED_FROM_S for s in seconds.values())} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

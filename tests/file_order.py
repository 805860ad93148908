"""The order test files are handed to the workers: the longest first, from the seconds a past run measured.

The default run gives each worker whole files (`--dist loadfile`), in collection order. Alphabetical order left
the longest files (a nightly, a killed nightly, the guests' images) for the end of the run, where one worker
played them while the others sat idle: 545 s where the longest-first order takes 484 s, for the same 1,934 s of
tests on four workers (simulated from one run's junit.xml, 2026-12-06). The seconds live in
tests/file_seconds.toml; `python -m tests.file_order reports/junit.xml` rewrites it from a run's junit file.
A file it does not name (a new one) runs after those it names; a stale figure only costs packing, never a test."""

from __future__ import annotations

import sys
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

SECONDS = Path(__file__).resolve().parent / "file_seconds.toml"
ROOT = SECONDS.parent.parent


def file_seconds(path: Path = SECONDS) -> dict[str, float]:
    """Test file (path from the repository's root) -> seconds its tests took in the run it was written from."""
    if not path.exists():
        return {}
    return {str(k): float(v) for k, v in tomllib.loads(path.read_text())["files"].items()}


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """`items` (pytest items, each with `.nodeid`) with whole files ordered longest first; within a file, and among
    files of equal seconds, the collection order is kept."""
    rank = {}
    for item in items:
        rank.setdefault(item.nodeid.split("::")[0], len(rank))
    return sorted(items, key=lambda i: (-seconds.get(i.nodeid.split("::")[0], 0.0), rank[i.nodeid.split("::")[0]]))


def _file_of(classname: str) -> str:
    """The test file of a junit classname ("tests.unit.test_x" or, for a test class, "tests.unit.test_x.TestY")."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        name = "/".join(parts[:end]) + ".py"
        if (ROOT / name).is_file():
            return name
    return classname.replace(".", "/") + ".py"


def seconds_from_junit(junit: Path) -> dict[str, float]:
    """Per test file, the seconds of its test cases in a junit.xml (pytest writes classname as a dotted path)."""
    per_file: Counter[str] = Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        per_file[_file_of(case.get("classname", ""))] += float(case.get("time", 0))
    return dict(per_file)


def main(argv: list[str]) -> int:
    """Rewrite tests/file_seconds.toml from the junit.xml named in argv."""
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tests.file_order JUNIT_XML  (a default run writes reports/junit.xml)", file=sys.stderr)
        return 2
    seconds = seconds_from_junit(Path(argv[0]))
    lines = [
        "# Seconds each test file's tests took in one default run (tests/file_order.py orders files by them).",
        "# Rewrite with: python -m tests.file_order reports/junit.xml",
        "[files]",
        *(f'"{name}" = {secs:.1f}' for name, secs in sorted(seconds.items(), key=lambda kv: -kv[1]) if secs >= 0.5),
    ]
    SECONDS.write_text("\n".join(lines) + "\n")
    print(f"{SECONDS}: {len(lines) - 3} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

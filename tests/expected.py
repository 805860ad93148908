"""Checked-in expected files (tests/expected/): a test's output compared with one line by line, failing with a
diff of the lines that changed; `pytest --update-expected` rewrites them from the run instead, on purpose."""

from __future__ import annotations

import difflib

import pytest

from tests.conftest import REPO

EXPECTED_DIR = REPO / "tests" / "expected"


def check_expected(lines: list[str], name: str, update: bool) -> None:
    """`lines` are what tests/expected/`name` holds (or, with `update`, become it)."""
    path = EXPECTED_DIR / name
    text = "".join(f"{line}\n" for line in lines)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    where = path.relative_to(REPO)
    if not path.is_file():
        pytest.fail(f"{where} does not exist: write it with `pytest --update-expected`", pytrace=False)
    expected = path.read_text(encoding="utf-8").splitlines()
    if lines != expected:
        diff = difflib.unified_diff(expected, lines, f"{where} (expected)", "this run", lineterm="", n=1)
        hint = "if the change is meant: rerun with --update-expected and review the file's diff"
        pytest.fail("\n".join([f"the lines differ from {where}:", *diff, hint]), pytrace=False)

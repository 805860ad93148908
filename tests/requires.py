"""Tests that need an external program ask for it here, by its name in bench/core/programs.toml.

Missing, the test is skipped on a developer's machine and fails under CI (`CI` set to true/1/yes), so CI
cannot stay green by skipping what setup failed to install. Use `require_program("bmaptool")` in a test or
fixture (it returns the program's path), or mark a test or module `@pytest.mark.programs("bmaptool", ...)`.
"""

from __future__ import annotations

import os

import pytest

from bench.core.programs import get_program

CI_VALUES = ("1", "true", "yes")


def in_ci() -> bool:
    """True when running under CI ($CI is true, 1 or yes), where a missing program is a failure."""
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def require_program(name: str) -> str:
    """The path of manifest program `name`; skip the test when it is missing (fail under CI)."""
    program = get_program(name)  # KeyError for a program the manifest lacks: add it there first
    found = program.find()
    if found is None:
        why = f"{name} is not installed ({program.fix})"
        if in_ci():
            pytest.fail(f"{why}; CI=true: a missing program fails instead of skipping", pytrace=False)
        pytest.skip(why)
    return found

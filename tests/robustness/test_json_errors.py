"""`--json` answers every outcome on stdout, errors included (issue 32): every subcommand, given a bad argument
(an unknown option, and a missing fleet file where it takes one), prints exactly one JSON object
{"ok": false, "error": {"code", "message", "file", "field", "device", "hint"}} whose code is the exit code."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import build_parser
from tests.conftest import REPO


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], set[str]]]:
    """Every runnable subcommand: its words and its option strings."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(path, {o for a in parser._actions for o in a.option_strings})]
    return [leaf for name, child in subs[0].choices.items() for leaf in _leaves(child, (*path, name))]


LEAVES = _leaves(build_parser())


def _cases(tmp: Path) -> list[tuple[str, list[str], int]]:
    cases = []
    for words, options in LEAVES:
        name = " ".join(words)
        cases.append((f"{name} --bogus", [*words, "--json", "--bogus"], 2))
        if "--fleet" in options:
            cases.append((f"{name} --fleet missing", [*words, "--json", "--fleet", str(tmp / "none.toml")], 2))
    return cases


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, int, dict]]:
    """Every case run once, in one process (tests.robustness.cli_batch)."""
    cases = _cases(tmp_path_factory.mktemp("json"))
    argvs = json.dumps([c[1] for c in cases])
    run = subprocess.run([sys.executable, "-m", "tests.robustness.cli_batch"], input=argvs, cwd=REPO,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(results) == len(cases)
    return [(name, code, got) for (name, _argv, code), got in zip(cases, results, strict=True)]


def test_every_subcommand_is_walked() -> None:
    names = {" ".join(w) for w, _ in LEAVES}
    assert {"fleet list", "ota serve", "virtual up", "lab serve", "nightly", "report", "model publish"} <= names
    assert len(names) >= 30


def test_every_error_is_one_json_object_on_stdout(walked: list[tuple[str, int, dict]]) -> None:
    bad = []
    for name, code, got in walked:
        try:
            doc = json.loads(got["stdout"])
        except json.JSONDecodeError:
            bad.append(f"{name}: stdout is not one JSON document: {got['stdout'][:200]!r} ({got['stderr'][-300:]})")
            continue
        error = doc.get("error") or {}
        if doc.get("ok") is not False or error.get("code") != got["code"] or got["code"] != code:
            bad.append(f"{name}: exit {got['code']}, stdout {doc}")
        elif set(error) != {"code", "message", "file", "field", "device", "hint"} or not error["message"]:
            bad.append(f"{name}: error object {error}")
        if "Traceback" in got["stderr"]:
            bad.append(f"{name}: traceback {got['stderr'][-500:]}")
    assert not bad, "\n".join(bad)


def test_the_error_names_the_file(walked: list[tuple[str, int, dict]]) -> None:
    """A missing fleet file is named in the JSON's `file` (a script needs no message parsing to find it)."""
    errors = [json.loads(got["stdout"])["error"] for name, _c, got in walked if name.endswith("--fleet missing")]
    named = [e for e in errors if "none.toml" in e["message"]]  # the others miss a required argument first
    assert len(named) >= 10 and all(e["file"] and e["file"].endswith("none.toml") for e in named), named

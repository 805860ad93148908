"""A results store damaged outside the bench (by hand, a disk, another program): every value the bench reads
back is checked, and a bad one is exit 2 naming the store's table, row and field, never a traceback or the
regression code 1. SQLite's `quick_check` passes on all of these: the file is sound, its values are not."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.store.results import open_store
from tests.conftest import REPO
from tests.stored_runs import build_store

# name -> (SQL that damages the store, what the message names); run 3 is the newest, its devices c6-a and pi5-1
CASES: dict[str, tuple[str, str]] = {
    "schema_version not a number": ("UPDATE meta SET value = 'abc'", "table meta, row 'schema_version', field value"),
    "schema_version negative": ("UPDATE meta SET value = '-1'", "table meta, row 'schema_version', field value"),
    "schema_version 10^23": (
        "UPDATE meta SET value = '99999999999999999999999'",
        "table meta, row 'schema_version', field value",
    ),
    "runs.summary not JSON": ("UPDATE runs SET summary = 'not json' WHERE id = 3", "table runs, row 3, field summary"),
    "runs.summary a list": ("UPDATE runs SET summary = '[1]' WHERE id = 3", "table runs, row 3, field summary"),
    "runs.config nested 100000 deep": (
        "UPDATE runs SET config = '" + "[" * 100_000 + "' WHERE id = 3",
        "table runs, row 3, field config",
    ),
    "runs.speed text": ("UPDATE runs SET speed = 'fast' WHERE id = 3", "table runs, row 3, field speed"),
    "devices.info a list": (
        "UPDATE devices SET info = '[1, 2]' WHERE run_id = 3 AND name = 'c6-a'",
        "table devices, row (3, 'c6-a'), field info",
    ),
    "devices.info a number": ("UPDATE devices SET info = '7' WHERE run_id = 3", "table devices, row (3, "),
    "measurements.value text": (
        "UPDATE measurements SET value = 'abc' WHERE run_id = 3 AND device = 'c6-a'",
        "table measurements, row (3, 'c6-a', ",
    ),
    "measurements.value a blob": (
        "UPDATE measurements SET value = x'00ff' WHERE run_id = 3",
        "table measurements, row (3, ",
    ),
    "measurements.samples text": (
        "UPDATE measurements SET samples = 'many' WHERE run_id = 3",
        "field samples",
    ),
    "histograms.encoded not HDR": (
        "UPDATE histograms SET encoded = '!!!' WHERE run_id = 3",
        "table histograms, row (3, ",
    ),
}


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 3 runs on 2 devices."""
    path = tmp_path_factory.mktemp("store") / "sound.sqlite"
    build_store(path, runs=3, devices=2, frames=50)
    return path


def _batch(argvs: list[list[str]]) -> list[dict]:
    run = subprocess.run([sys.executable, "-m", "tests.robustness.cli_batch"], input=json.dumps(argvs), cwd=REPO,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def test_damaged_sqlite_store_is_named(sound_store: Path, tmp_path: Path) -> None:
    """Each damage: `report` (latest run) and `report 3` exit 2 naming the table, row and field."""
    argvs, expect = [], []
    for n, (name, (sql, named)) in enumerate(CASES.items()):
        path = tmp_path / f"{n}.sqlite"
        shutil.copy(sound_store, path)
        with sqlite3.connect(path) as db:
            db.execute(sql)
            assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        for argv in (["report", "--results", str(path)], ["report", "3", "--results", str(path)]):
            argvs.append([*argv, "--output-dir", str(tmp_path / f"out{n}")])
            expect.append((name, named))
    failures = []
    for (name, named), result in zip(expect, _batch(argvs), strict=True):
        if result["code"] != ExitCode.USAGE or named not in result["stderr"] or "Traceback" in result["stderr"]:
            failures.append(f"{name}: exit {result['code']}: {result['stderr'][-300:]}")
    assert not failures, "\n".join(failures)


def test_damaged_postgres_store_is_named(sound_store: Path, pg_url: str) -> None:
    """The same checks on PostgreSQL: a schema_version of 'abc', a summary that is not JSON, an info that is a
    list, each exit 2 naming the table, row and field."""
    build_store(pg_url, runs=3, devices=2, frames=50)  # type: ignore[arg-type]  (a URL works too)
    damage = [
        ("UPDATE runs SET summary = 'not json' WHERE id = 3", "UPDATE runs SET summary = '{}' WHERE id = 3",
         "table runs, row 3, field summary"),
        ("UPDATE devices SET info = '[1, 2]' WHERE run_id = 3 AND name = 'c6-a'",
         "UPDATE devices SET info = '{}' WHERE run_id = 3 AND name = 'c6-a'",
         "table devices, row (3, 'c6-a'), field info"),
        ("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'",
         "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
         "table meta, row 'schema_version', field value"),
    ]  # fmt: skip
    for sql, undo, named in damage:
        with open_store(pg_url) as store:
            store.db.execute(sql)
        result = _batch([["report", "3", "--results", pg_url, "--output-dir", str(sound_store.parent / "pg")]])[0]
        assert result["code"] == ExitCode.USAGE and named in result["stderr"], result["stderr"][-500:]
        assert "Traceback" not in result["stderr"]
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(undo)

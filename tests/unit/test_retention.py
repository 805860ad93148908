"""Retention of raw rows (bench.store.retention): frame and input rows of runs outside the fleet's
`[results]` policy are deleted and their space reclaimed, in SQLite and PostgreSQL alike; everything else of
a run stays, and an old run's report still renders from its histograms and stored figures. Inputs are stored
packed (one row per run, device and channel) and read back exactly, also from stores written a row per input."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest

from bench.cli import main
from bench.config.fleet import RawRetention, parse_retention
from bench.core.errors import ConfigError
from bench.report.publish import publish_run
from bench.store.results import ResultStore, open_store
from bench.store.retention import prune, to_prune
from tests.stored_runs import build_store

RUNS, DEVICES, FRAMES = 4, 2, 300
INPUTS = [(seq, ("gaze", "voice", "mocap")[seq % 3], 1_000_000 * seq if seq % 7 else None, 1_000_000 * seq + 37)
          for seq in range(500)]  # fmt: skip


def _store(location: str | Path) -> int:
    """RUNS runs of session "synthetic" on DEVICES devices, with frames, histograms, faults and inputs."""
    last = build_store(location, runs=RUNS, devices=DEVICES, frames=FRAMES)  # type: ignore[arg-type]
    with open_store(location) as store:
        for run in store.runs.latest():
            for dev in store.runs.devices(run.id):
                store.frames.add_inputs(run.id, dev.name, INPUTS)
    return last


def _counts(store: ResultStore, run_id: int) -> tuple[int, int, int, int]:
    """(frames, inputs, measurements, histograms) of one run's first device."""
    device = store.runs.devices(run_id)[0].name
    frames, measures = store.frames, store.measures
    return (frames.frame_count(run_id, device), frames.input_count(run_id, device),
            len(measures.measurements(run_id, device)), len(measures.histograms(run_id, device)))  # fmt: skip


def _packed_bytes(store: ResultStore) -> int:
    """PostgreSQL bytes of the packed frame and input rows, their TOAST and indexes counted with them."""
    sql = "SELECT pg_total_relation_size('frame_packs') + pg_total_relation_size('input_sends')"
    return int(store.db.execute(sql).fetchone()[0])


def _check_prune(location: str | Path, tmp_path: Path) -> None:
    last = _store(location)
    with open_store(location) as store:
        first = store.runs.latest()[-1].id
        kept_figures = _counts(store, first)[2:]
        faults = store.measures.faults(first)
        policy = RawRetention(keep_raw_days=0, keep_raw_runs=2)
        dry = prune(store, policy, dry_run=True)
        assert dry.frames == (RUNS - 2) * DEVICES * FRAMES and dry.inputs == (RUNS - 2) * DEVICES * len(INPUTS)
        assert _counts(store, first)[:2] == (FRAMES, len(INPUTS))  # a dry run changes nothing
        done = prune(store, policy)
        assert done.to_json() == {**dry.to_json(), "dry_run": False, "size_after_bytes": done.size_after}
        if isinstance(location, Path):  # SQLite: VACUUM rewrites the file
            assert done.size_after < done.size_before
        else:  # PostgreSQL: VACUUM leaves the file and makes the space reusable: rewriting the rows does not grow it
            size = _packed_bytes(store)
            store.frames.add_frames(first, "c6-a", list(store.frames.frames(last, "c6-a")))
            store.frames.add_inputs(first, "c6-a", INPUTS)
            store.runs.finish_run(first, "ok")  # packs the frames
            assert _packed_bytes(store) == size
            store.raw.prune(first, "c6-a")
        assert _counts(store, first) == (0, 0, *kept_figures) and store.measures.faults(first) == faults
        assert _counts(store, last)[:2] == (FRAMES, len(INPUTS))  # the last two runs keep theirs
        assert prune(store, policy).pruned == []  # nothing twice
        published = publish_run(store, first, reports_dir=tmp_path / "reports")
        recent = publish_run(store, last, reports_dir=tmp_path / "reports")
    old = {d["name"]: d for d in published.report.data["devices"]}
    for name, device in old.items():
        assert any("pruned" in note and "frame interval" in note for note in device["notes"])
        assert "frame_interval" not in published.report.plots[name] and "faults" not in published.report.plots[name]
        assert "latency_cdf" in published.report.plots[name]  # from the stored histogram
        assert device["summary"]["fps"] is not None
    assert "were pruned" in published.page.read_text()
    assert all("frame_interval" in plots for plots in recent.report.plots.values())
    assert not any("pruned" in n for d in recent.report.data["devices"] for n in d["notes"])


def test_prune_keeps_the_policy_and_old_reports_render_sqlite(tmp_path: Path) -> None:
    _check_prune(tmp_path / "r.sqlite", tmp_path)


def test_prune_keeps_the_policy_and_old_reports_render_postgresql(tmp_path: Path, pg_url: str) -> None:
    _check_prune(pg_url, tmp_path)


def test_days_keep_young_runs_and_running_runs_are_never_pruned(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    build_store(path, runs=3, devices=1, frames=50)
    with open_store(path) as store:
        assert to_prune(store, RawRetention(keep_raw_days=30, keep_raw_runs=0)) == ([], 3)
        later = dt.datetime.now(dt.UTC) + dt.timedelta(days=31)
        assert len(to_prune(store, RawRetention(keep_raw_days=30, keep_raw_runs=0), later)[0]) == 3
        assert len(to_prune(store, RawRetention(keep_raw_days=30, keep_raw_runs=1), later)[0]) == 2
        running = store.runs.begin_run("replay", session="synthetic")
        store.runs.add_device(running, "c6-a", "esp32c6")
        assert (running, "c6-a") not in to_prune(store, RawRetention(0, 0), later)[0]


def test_inputs_read_back_exactly_also_from_a_row_per_input_store(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with open_store(path) as store:
        run = store.runs.begin_run("replay")
        store.frames.add_inputs(run, "d", INPUTS[:300])
        store.frames.add_inputs(run, "d", INPUTS[250:])  # a second write merges (same seqs replaced)
        assert store.frames.inputs(run, "d") == {seq: sent for seq, _, _, sent in INPUTS}
        assert store.frames.input_count(run, "d") == len(INPUTS)
        rows = store.db.execute("SELECT ch, n FROM input_sends WHERE run_id = ?", (run,)).fetchall()
        assert sorted(rows) == [("gaze", 167), ("mocap", 166), ("voice", 167)]
        store.db.execute("INSERT INTO inputs VALUES (?, 'old', 0, 'gaze', 5, 7)", (run,))  # written before packing
        assert store.frames.inputs(run, "old") == {0: 7} and store.frames.input_count(run, "old") == 1
        assert store.raw.prune(run, "old") == (0, 1) and store.frames.inputs(run, "old") == {}
        assert store.raw.pruned(run) == {}  # it had no frames: its report has no frame plots to miss


def test_retention_settings_are_typed_and_named() -> None:
    assert parse_retention({}, "f: [results]") == RawRetention(30, 30)
    assert parse_retention({"keep_raw_days": 7}, "f: [results]") == RawRetention(7, 30)
    for raw, words in (({"keep_raw_days": "7"}, "'results.keep_raw_days': expected int"),
                       ({"keep_raw_runs": -1}, "'results.keep_raw_runs': -1 is out of range"),
                       ({"keep_raw": 1}, "'results.keep_raw': not a field of \\[results\\]")):  # fmt: skip
        with pytest.raises(ConfigError, match=words):
            parse_retention(raw, "f: [results]")


def test_prune_command_dry_run_json_and_a_bad_fleet(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "r.sqlite"
    build_store(path, runs=3, devices=1, frames=50)
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[bench]\nresults = "{path}"\n[results]\nkeep_raw_days = 0\nkeep_raw_runs = 1\n')
    assert main(["results", "prune", "--fleet", str(fleet), "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] and doc["frames_removed"] == 100 and doc["pruned_device_runs"] == 2
    assert main(["results", "prune", "--results", str(path), "--keep-raw-days", "0", "--keep-raw-runs", "2"]) == 0
    assert "removed 50 frame" in capsys.readouterr().out
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM raw_pruned").fetchone()[0] == 1
    fleet.write_text("[results]\nkeep_raw_days = -3\n")
    assert main(["results", "prune", "--fleet", str(fleet)]) == 2
    assert "keep_raw_days" in capsys.readouterr().err

"""The results store: write and read back every table; a killed writer keeps what it wrote."""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.agent.frame import Frame
from bench.core.errors import ConfigError
from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.measure.measurement import Measurement
from bench.results.baseline import set_baseline
from bench.store.results import open_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same tests against both backends (PostgreSQL: a fresh database on the run's server)."""
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite")
    return request.getfixturevalue("pg_url")


def test_round_trip_of_every_table(location: str) -> None:
    with open_store(location) as store:
        run = store.runs.begin_run("replay", bench="b1", session="combat-0000", speed=1.0, config={"x": 1})
        store.runs.add_device(run, "c6-a", "esp32c6", {"voice_mode": "voicef"})
        store.runs.update_device(run, "c6-a", status="ok", agent="npc-mpy")
        frames = [Frame(i, i * 50_000, due=i * 50_000 + 10, ran=i % 2 == 0, t0=i * 50_000 + 20, seq=i, skip=i % 2 == 1)
                  for i in range(5)]  # fmt: skip
        for f in frames:
            store.frames.add_frame(run, "c6-a", f, rx_ns=1000 + f.i)
        store.frames.add_inputs(run, "c6-a", [(0, "gaze", 5, 7), (1, "voice", 9, 12)])
        store.measures.add_measurements(
            run,
            "c6-a",
            [
                Measurement("fps", "FPS", 19.5, samples=400),
                Measurement("x_p99", "us", 3.0, flags=("too_few_samples_for_p99",)),
            ],
        )
        store.measures.add_histograms(run, "c6-a", [Histogram("decision_latency", "us").record_all([1000, 2000, 3000])])
        fault = FaultEvent("rollback", "oom", 4, 3, 10, 20, 30, 0.01, 2100, "MemoryError")
        store.measures.add_faults(run, "c6-a", [fault])
        store.frames.set_clock(run, "c6-a", 123.0, 1.5, 99, 40.0)
        store.runs.finish_run(run, "ok", {"devices": 1})

    with open_store(location if "://" in location else f"sqlite:///{location}") as store:
        (row,) = store.runs.latest()
        assert (row.id, row.kind, row.status, row.session, row.config, row.summary["devices"]) == (
            run,
            "replay",
            "ok",
            "combat-0000",
            {"x": 1},
            1,
        )
        (dev,) = store.runs.devices(run)
        assert dev.status == "ok" and dev.info == {"voice_mode": "voicef", "agent": "npc-mpy"}
        back = list(store.frames.frames(run, "c6-a"))
        assert [(f.i, f.ran, f.skip, f.rx_ns) for f in back] == [(f.i, f.ran, f.skip, 1000 + f.i) for f in frames]
        assert store.frames.inputs(run, "c6-a") == {0: 7, 1: 12}
        ms = {m.name: m for m in store.measures.measurements(run, "c6-a")}
        assert ms["fps"].value == 19.5 and ms["fps"].samples == 400
        assert ms["x_p99"].flags == ("too_few_samples_for_p99",)
        hist = store.measures.histograms(run, "c6-a")["decision_latency"]
        assert hist.count == 3 and hist.summary().max == pytest.approx(3000, rel=1e-3)
        assert store.measures.faults(run) == [("c6-a", fault)]
        assert store.frames.clock(run, "c6-a") == {
            "offset_ns": 123.0,
            "drift_ppm": 1.5,
            "ref_ns": 99,
            "uncertainty_ns": 40.0,
        }
        assert store.measures.history("fps", "c6-a") == [(run, row.started_at, 19.5)]


def test_unsupported_url_and_unknown_run_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="scheme 'mysql' is not supported"):
        open_store("mysql://bench@db/results")
    with pytest.raises(ConfigError, match=r"results store postgresql://bench:\*\*\*@127.0.0.1:1/results: cannot open"):
        open_store("postgresql://bench:secret@127.0.0.1:1/results")  # nothing listens on port 1
    with open_store(tmp_path / "r.sqlite") as store, pytest.raises(ConfigError, match="no run 42"):
        store.runs.run(42)


WRITER = textwrap.dedent(
    """
    import sys, time
    from bench.agent.frame import Frame
    from bench.store.results import open_store
    store = open_store(sys.argv[1])
    run = store.runs.begin_run("replay", session="s")
    store.runs.add_device(run, "d", "pi5")
    background = store.frames.frame_sink() if sys.argv[2] == "background" else None
    i = 0
    while True:
        frame = Frame(i, i * 16_667, ran=True, t0=i * 16_667 + 5, t1=i * 16_667 + 900, seq=i)
        if background:
            background.put(run, "d", frame)
            while background.written <= i:  # report only what is committed
                time.sleep(0.0002)
        else:
            store.frames.add_frame(run, "d", frame)
        print(i, flush=True)
        i += 1
        time.sleep(0.001)
    """
)


@pytest.mark.parametrize("writer", ["direct", "background"])
def test_a_killed_writer_keeps_every_frame_it_wrote(location: str, writer: str) -> None:
    db = location
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), writer], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        last = -1
        for line in proc.stdout:
            last = int(line)
            if last >= 200:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with open_store(db) as store:
        (run,) = store.runs.latest()
        # the writer is gone: opening the store marks the run it left `running` as interrupted
        assert run.status == "interrupted" and run.finished_at is not None and store.interrupted_runs == [run.id]
        assert [d.status for d in store.runs.devices(run.id)] == ["interrupted"]
        with pytest.raises(ConfigError, match=f"run {run.id} is interrupted: .* cannot be a baseline"):
            set_baseline(store, run.id, "nightly")
        frames = list(store.frames.frames(run.id, "d"))
        # every frame the writer reported as written is there, in order, intact
        assert len(frames) >= last + 1
        assert [f.i for f in frames] == list(range(len(frames)))
        assert all(f.t1 - f.t0 == 895 for f in frames)
        assert store.db.execute("SELECT COUNT(*) FROM frames").fetchone()[0] == 0  # packed when marked interrupted


def _odd_frames(start: int, stop: int) -> list[Frame]:
    """Frame records with every optional field absent somewhere, -1 sequence numbers and fractional `p`."""
    return [Frame(i, i * 16_667, due=None if i % 5 == 0 else i * 16_667 + 3, ran=i % 3 != 0,
                  t0=None if i % 3 == 0 else i * 16_667 + 40, t1=None if i % 3 == 0 else i * 16_667 + 2_400,
                  act=None if i % 4 == 0 else i % 8, p=None if i % 6 == 0 else round(0.01 * (i % 97), 2),
                  seq=-1 if i % 2 else i // 2, skip=i % 7 == 0, late=i % 11 == 0, q=i % 3,
                  model=None if i < 3 else 7 + i // 50, rx_ns=None if i % 9 == 0 else 10**18 + i * 16_667_000)
            for i in range(start, stop)]  # fmt: skip


def test_frames_are_packed_when_their_run_finishes_and_read_back_exactly(location: str) -> None:
    frames = _odd_frames(0, 300)
    with open_store(location) as store:
        run = store.runs.begin_run("replay")
        store.runs.add_device(run, "d", "pi5")
        store.frames.add_frames(run, "d", frames[150:])  # out of order, and one record written twice
        store.frames.add_frames(run, "d", [*frames[:150], frames[200]])
        assert (
            list(store.frames.frames(run, "d")) == frames and store.frames.frame_count(run) == 300
        )  # rows while it runs
        store.runs.finish_run(run, "ok")
        assert store.db.execute("SELECT COUNT(*) FROM frames").fetchone()[0] == 0
        assert store.db.execute("SELECT n FROM frame_packs WHERE run_id = ?", (run,)).fetchall() == [(300,)]
        assert list(store.frames.frames(run, "d")) == frames and store.frames.frame_count(run, "d") == 300
        later = _odd_frames(290, 320)  # written after the run was packed: merged, each record counted once
        store.frames.add_frames(run, "d", later)
        assert list(store.frames.frames(run, "d")) == frames[:290] + later and store.frames.frame_count(run) == 320
        if "://" not in location:  # (PostgreSQL's BIGINT columns refuse the write itself)
            bad = store.runs.begin_run(
                "replay"
            )  # an agent's field that is no integer: its rows stay rows, nothing fails
            store.frames.add_frames(bad, "d", [Frame(0, 0, t0="soon"), Frame(1, 16_667, t0=16_700)])  # type: ignore[arg-type]
            store.runs.finish_run(bad, "ok")
            assert store.frames.frame_count(bad) == 2 and store.runs.run(bad).status == "ok"


def test_a_store_written_a_row_per_frame_still_reads_and_renders(tmp_path: Path) -> None:
    from bench.report.publish import publish_run
    from tests.stored_runs import build_store

    path = tmp_path / "r.sqlite"
    last = build_store(path, runs=2, devices=1, frames=300)
    with open_store(path) as store:
        packed = list(store.frames.frames(last, "c6-a"))
        new_view = publish_run(store, last, reports_dir=tmp_path / "new").report
    db = sqlite3.connect(path)  # the layout before frame_packs: a row per frame, no frame_packs table
    db.execute("DROP TABLE frame_packs")
    db.executemany("INSERT INTO frames VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   [(last, "c6-a", *dataclasses.astuple(f)) for f in packed])  # fmt: skip
    db.commit()
    db.close()
    with open_store(path) as store:
        assert list(store.frames.frames(last, "c6-a")) == packed and store.frames.frame_count(last, "c6-a") == 300
        old_view = publish_run(store, last, reports_dir=tmp_path / "old").report
        assert store.raw.prune(last, "c6-a") == (300, 0) and store.frames.frame_count(last) == 0
    assert old_view.data["devices"] == new_view.data["devices"]
    assert old_view.plots["c6-a"].keys() == new_view.plots["c6-a"].keys() >= {"frame_interval", "faults"}

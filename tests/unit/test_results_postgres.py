"""PostgreSQL results: a run reads back exactly as the same run stored in SQLite (the report's view of it:
frame traces from packed arrays, histograms, measurements, faults, baselines), and bench hosts writing
into one fresh database at once (schema creation included) lose nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.report.view_adapter import load_run
from bench.store.results import open_store
from tests.conftest import REPO
from tests.stored_runs import build_store


def test_a_run_reads_back_the_same_from_postgresql_and_sqlite(tmp_path: Path, pg_url: str) -> None:
    sqlite_path = tmp_path / "r.sqlite"
    last_sqlite = build_store(sqlite_path, runs=2, devices=2, frames=400)
    last_pg = build_store(pg_url, runs=2, devices=2, frames=400)  # type: ignore[arg-type]  (a URL works too)
    with open_store(sqlite_path) as lite, open_store(pg_url) as pg:
        a, b = load_run(lite, last_sqlite), load_run(pg, last_pg)
        assert pg.windows.named() is not None and pg.windows.named().run_id == lite.windows.named().run_id
        assert list(a.devices) == list(b.devices) == ["c6-a", "orin-1"]
        for name in a.devices:
            da, db = a.devices[name], b.devices[name]
            assert da.scalars == db.scalars and da.model_versions == db.model_versions
            assert [(f.kind, f.t_s, f.detail) for f in da.faults] == [(f.kind, f.t_s, f.detail) for f in db.faults]
            assert da.frames is not None and db.frames is not None
            np.testing.assert_array_equal(da.frames.t_s, db.frames.t_s)
            np.testing.assert_array_equal(da.frames.deviation_us, db.frames.deviation_us)
            assert set(da.samples) == set(db.samples)
            for source in da.samples:
                np.testing.assert_array_equal(da.samples[source].values, db.samples[source].values)
        assert pg.measures.history("fps", "orin-1") and [v for _, _, v in pg.measures.history("fps", "orin-1")] == [
            v for _, _, v in lite.measures.history("fps", "orin-1")
        ]


def test_verdict_evidence_is_the_same_in_postgresql_and_sqlite(tmp_path: Path, pg_url: str) -> None:
    from bench.report.publish import publish_run
    from bench.results.evidence import record_verdicts, stored_verdicts

    outcomes = []
    for location in (tmp_path / "r.sqlite", pg_url):
        last = build_store(location, runs=7, devices=2, frames=400)  # type: ignore[arg-type]
        with open_store(location) as store:
            store.verdicts.record_host(last, {"host": "h", "others_pct": 3.0, "cores": 2})
            store.verdicts.record_fingerprint(last, "orin-1", {"model_sha256": "ab" * 32, "virtual": True})
            published = publish_run(store, last, reports_dir=None)  # judged now against the window
            record_verdicts(store, last, published.verdicts)
            outcomes.append((
                sorted((v.device, v.metric, v.status, v.baseline_runs) for v in stored_verdicts(store, last)),
                store.windows.membership(last - 1), store.verdicts.host_of(last), store.verdicts.fingerprints(last),
            ))  # fmt: skip
    assert outcomes[0] == outcomes[1]
    verdicts = outcomes[0][0]
    assert ("orin-1", "latency_p50", "regression", (2, 3, 4, 5, 6)) in verdicts


WRITER = """
import sys
from bench.measure.measurement import Measurement
from bench.agent.frame import Frame
from bench.store.results import open_store
url, host = sys.argv[1], sys.argv[2]
with open_store(url) as store:  # every writer creates the schema at once on a fresh database
    for r in range(5):
        run = store.runs.begin_run("replay", bench=host)
        store.runs.add_device(run, "d", "pi5")
        for start in range(0, 200, 20):
            frames = [Frame(i, i * 16_667, ran=True, t0=i, t1=i + 9, seq=i) for i in range(start, start + 20)]
            store.frames.add_frames(run, "d", frames)
        store.measures.add_measurements(run, "d", [Measurement("fps", "FPS", 60.0)])
        store.runs.finish_run(run, "ok")
"""


def test_bench_hosts_writing_at_once_lose_nothing(pg_url: str) -> None:
    hosts = [f"host-{n}" for n in range(4)]
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, host], cwd=REPO, stderr=subprocess.PIPE,
                                text=True) for host in hosts]  # fmt: skip
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err[-2000:]
    with open_store(pg_url) as store:
        runs = store.runs.latest()
        assert len(runs) == 20 and len({r.id for r in runs}) == 20
        assert sorted({r.bench for r in runs}) == hosts and all(r.status == "ok" for r in runs)
        assert all(store.frames.frame_count(r.id, "d") == 200 for r in runs)
        assert all(store.measures.measurements(r.id, "d")[0].value == 60.0 for r in runs)

"""A run stored in PostgreSQL reads back exactly as the same run stored in SQLite (the report's view of it:
frame traces through group_concat, histograms, measurements, faults, baselines)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.results import open_store
from bench.results.baseline import get_baseline
from bench.results.view_adapter import load_run
from tests.stored_runs import build_store


def test_a_run_reads_back_the_same_from_postgresql_and_sqlite(tmp_path: Path, pg_url: str) -> None:
    sqlite_path = tmp_path / "r.sqlite"
    last_sqlite = build_store(sqlite_path, runs=2, devices=2, frames=400)
    last_pg = build_store(pg_url, runs=2, devices=2, frames=400)  # type: ignore[arg-type]  (a URL works too)
    with open_store(sqlite_path) as lite, open_store(pg_url) as pg:
        a, b = load_run(lite, last_sqlite), load_run(pg, last_pg)
        assert get_baseline(pg) is not None and get_baseline(pg).run_id == get_baseline(lite).run_id
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
        assert pg.history("fps", "orin-1") and [v for _, _, v in pg.history("fps", "orin-1")] == [
            v for _, _, v in lite.history("fps", "orin-1")
        ]

"""Device health records: state changes, events, MTBF; on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from bench.recovery.records import bad_devices, summary
from bench.store.health import BAD, FAILURE, GOOD, RECOVERED, UNRECOVERED
from bench.store.results import open_store


def _exercise(location: str) -> None:
    store = open_store(location)
    try:
        run = store.runs.begin_run("replay", session="s")
        store.runs.add_device(run, "c6-a", "esp32c6")
        assert store.health.current("c6-a").state == GOOD and not bad_devices(store, ["c6-a", "c6-b"])
        store.health.record_event("c6-a", FAILURE, run_id=run, detail="frame loop stalled")
        store.health.record_event("c6-a", RECOVERED, step="hard_reset", seconds=1.5, run_id=run)
        store.health.record_event("c6-a", FAILURE, run_id=run, detail="no hello")
        store.health.record_event("c6-a", UNRECOVERED, seconds=30.0, run_id=run)
        marked = store.health.set_state("c6-a", BAD, "no step of the recovery ladder brought it back", run)
        assert marked.bad and bad_devices(store, ["c6-a", "c6-b"]) == {"c6-a": marked}
        assert store.health.set_state("c6-a", BAD, marked.reason) == marked  # unchanged: no new event
        later = dt.datetime.fromisoformat(store.runs.run(run).started_at) + dt.timedelta(hours=10)
        s = summary(store, "c6-a", now=later)
        assert (s.failures, s.recoveries, s.unrecovered, s.by_step) == (2, 1, 1, {"hard_reset": 1})
        assert s.mtbf_h == pytest.approx(5.0, abs=0.01)  # 10 h since its first run, 2 failures
        store.health.set_state("c6-a", GOOD)
        assert not store.health.current("c6-a").bad
        kinds = [e["event"] for e in store.health.events("c6-a")]
        assert kinds == ["failure", "recovered", "failure", "unrecovered", "bad", "good"]
        assert summary(store, "never-seen").mtbf_h is None
    finally:
        store.close()


def test_health_records_sqlite(tmp_path: Path) -> None:
    _exercise(str(tmp_path / "r.sqlite"))


def test_health_records_postgres(pg_url: str) -> None:
    _exercise(pg_url)

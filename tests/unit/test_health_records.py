"""Device health records: state changes, events, MTBF; on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from bench.recovery.records import (
    BAD,
    FAILURE,
    GOOD,
    RECOVERED,
    UNRECOVERED,
    bad_devices,
    events,
    health,
    record_event,
    set_state,
    summary,
)
from bench.store import open_store


def _exercise(location: str) -> None:
    store = open_store(location)
    try:
        run = store.begin_run("replay", session="s")
        store.add_device(run, "c6-a", "esp32c6")
        assert health(store, "c6-a").state == GOOD and not bad_devices(store, ["c6-a", "c6-b"])
        record_event(store, "c6-a", FAILURE, run_id=run, detail="frame loop stalled")
        record_event(store, "c6-a", RECOVERED, step="hard_reset", seconds=1.5, run_id=run)
        record_event(store, "c6-a", FAILURE, run_id=run, detail="no hello")
        record_event(store, "c6-a", UNRECOVERED, seconds=30.0, run_id=run)
        marked = set_state(store, "c6-a", BAD, "no step of the recovery ladder brought it back", run)
        assert marked.bad and bad_devices(store, ["c6-a", "c6-b"]) == {"c6-a": marked}
        assert set_state(store, "c6-a", BAD, marked.reason) == marked  # unchanged: no new event
        later = dt.datetime.fromisoformat(store.run(run).started_at) + dt.timedelta(hours=10)
        s = summary(store, "c6-a", now=later)
        assert (s.failures, s.recoveries, s.unrecovered, s.by_step) == (2, 1, 1, {"hard_reset": 1})
        assert s.mtbf_h == pytest.approx(5.0, abs=0.01)  # 10 h since its first run, 2 failures
        set_state(store, "c6-a", GOOD)
        assert not health(store, "c6-a").bad
        kinds = [e["event"] for e in events(store, "c6-a")]
        assert kinds == ["failure", "recovered", "failure", "unrecovered", "bad", "good"]
        assert summary(store, "never-seen").mtbf_h is None
    finally:
        store.close()


def test_health_records_sqlite(tmp_path: Path) -> None:
    _exercise(str(tmp_path / "r.sqlite"))


def test_health_records_postgres(pg_url: str) -> None:
    _exercise(pg_url)

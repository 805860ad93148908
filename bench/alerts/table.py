"""Alerts in the results store (tables `alerts` and `alert_events`, bench.store.schema): SQLite on one bench host,
or PostgreSQL shared by a lab's hosts, so an alert acknowledged on one host reads acknowledged on every other."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.alerts.model import Alert, AlertError
from bench.store import stored
from bench.store.results import ResultStore

_COLUMNS = ("id, session, device, metric, kind, state, first_run, last_run, opened_at, state_since, owner, note,"
            " link, reason, of_alert, fixed_run, good_nights, data")  # fmt: skip


@dataclass(frozen=True)
class Event:
    """One change to an alert: opened, joined, reopened, fixed, acknowledged, invalid, downstream."""

    alert_id: int
    run_id: int | None
    at: str
    event: str
    actor: str  # the bench ("nightly on HOST") or the person ("user@host")
    detail: str

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"run_id": self.run_id, "at": self.at, "event": self.event, "actor": self.actor, "detail": self.detail}


def now_text() -> str:
    """Now, ISO-8601 UTC (the store's timestamps)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def who() -> str:
    """The person (or CI job) at this bench host: "user@host" (LG_HOSTNAME names the host, as for labgrid)."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        user = str(os.getuid())
    return f"{user}@{host}"


def _alert(row: tuple, store: ResultStore) -> Alert:
    return Alert(*row[:17], data=stored.json_object(row[17], store.label, "alerts", row[0], "data"))


def get(store: ResultStore, alert_id: int) -> Alert:
    """Alert `alert_id` (AlertError naming the store when there is none)."""
    row = store.db.execute(f"SELECT {_COLUMNS} FROM alerts WHERE id = ?", (alert_id,)).fetchone()
    if row is None:
        raise AlertError(f"results store {store.path}: no alert {alert_id}", hint="see `hilbench alerts list`")
    return _alert(row, store)


def select(store: ResultStore, *, states: Iterable[str] | None = None, device: str | None = None) -> list[Alert]:
    """Alerts (in `states`, on `device` when given), newest first."""
    where, params = [], []
    if states is not None:
        wanted = list(states)
        where.append(f"state IN ({','.join('?' * len(wanted))})")
        params += wanted
    if device:
        where.append("device = ?")
        params.append(device)
    sql = f"SELECT {_COLUMNS} FROM alerts" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC"
    return [_alert(r, store) for r in store.db.execute(sql, params).fetchall()]


def of_key(store: ResultStore, session: str, device: str, metric: str) -> Alert | None:
    """The newest alert of one session, device and metric, or None."""
    row = store.db.execute(
        f"SELECT {_COLUMNS} FROM alerts WHERE session = ? AND device = ? AND metric = ? ORDER BY id DESC LIMIT 1",
        (session, device, metric),
    ).fetchone()
    return _alert(row, store) if row else None


def of_session(store: ResultStore, session: str) -> list[Alert]:
    """The newest alert of each device and metric of a session."""
    newest: dict[tuple[str, str], Alert] = {}
    for row in store.db.execute(f"SELECT {_COLUMNS} FROM alerts WHERE session = ? ORDER BY id", (session,)):
        a = _alert(row, store)
        newest[(a.device, a.metric)] = a
    return list(newest.values())


def insert(store: ResultStore, alert: Alert) -> int:
    """Store a new alert (its `id` is ignored); returns its id."""
    cur = store.db.execute(
        "INSERT INTO alerts (session, device, metric, kind, state, first_run, last_run, opened_at, state_since,"
        " owner, note, link, reason, of_alert, fixed_run, good_nights, data)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
        (alert.session, alert.device, alert.metric, alert.kind, alert.state, alert.first_run, alert.last_run,
         alert.opened_at, alert.state_since, alert.owner, alert.note, alert.link, alert.reason, alert.of_alert,
         alert.fixed_run, alert.good_nights, json.dumps(alert.data, default=str)),
    )  # fmt: skip
    return int(cur.fetchall()[0][0])


def update(store: ResultStore, alert: Alert) -> None:
    """Write back every field of `alert` but its key and first night."""
    store.db.execute(
        "UPDATE alerts SET kind = ?, state = ?, last_run = ?, state_since = ?, owner = ?, note = ?, link = ?,"
        " reason = ?, of_alert = ?, fixed_run = ?, good_nights = ?, data = ? WHERE id = ?",
        (alert.kind, alert.state, alert.last_run, alert.state_since, alert.owner, alert.note, alert.link,
         alert.reason, alert.of_alert, alert.fixed_run, alert.good_nights, json.dumps(alert.data, default=str),
         alert.id),
    )  # fmt: skip


def add_event(
    store: ResultStore, alert_id: int, event: str, *, run_id: int | None, actor: str, detail: str = ""
) -> None:
    """Record one change to an alert."""
    store.db.execute(
        "INSERT INTO alert_events (alert_id, run_id, at, event, actor, detail) VALUES (?,?,?,?,?,?)",
        (alert_id, run_id, now_text(), event, actor, detail),
    )


def events(store: ResultStore, alert_id: int) -> list[Event]:
    """An alert's changes, oldest first."""
    rows = store.db.execute(
        "SELECT alert_id, run_id, at, event, actor, detail FROM alert_events WHERE alert_id = ? ORDER BY id",
        (alert_id,),
    )
    return [Event(*r) for r in rows.fetchall()]


def events_of_runs(store: ResultStore, run_ids: Iterable[int]) -> list[Event]:
    """The changes the nightly made with runs `run_ids`, oldest first."""
    ids = list(run_ids)
    if not ids:
        return []
    rows = store.db.execute(
        "SELECT alert_id, run_id, at, event, actor, detail FROM alert_events"
        f" WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY id",
        ids,
    )
    return [Event(*r) for r in rows.fetchall()]

"""Alerts in the results store (tables `alerts` and `alert_events`, bench.store.schema): SQLite on one bench host,
or PostgreSQL shared by a lab's hosts, so an alert acknowledged on one host reads acknowledged on every other."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import shlex
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.alerts.model import DRIFT, FAILURE, REGRESSION, STATES, Alert, AlertError
from bench.store import stored
from bench.store.results import ResultStore

KINDS = (REGRESSION, DRIFT, FAILURE)
_COLUMNS = ("id, session, device, metric, kind, state, first_run, last_run, opened_at, state_since, owner, note,"
            " link, reason, of_alert, fixed_run, good_nights, data")  # fmt: skip
_NAMES = tuple(name.strip() for name in _COLUMNS.split(","))
_TEXTS = ("session", "device", "metric", "owner", "note", "link", "reason")


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
    """The alert of a stored row, each field checked: a row changed outside the bench (a blob owner, a date
    that is not ISO-8601, an effect that is text) is a DamagedStore naming the row and field (exit 2)."""
    where = (store.label, "alerts", row[0])
    v = dict(zip(_NAMES, row, strict=True))
    texts = {k: stored.text(v[k], *where, k) for k in _TEXTS}
    for name, allowed in (("kind", KINDS), ("state", STATES)):
        if v[name] not in allowed:
            raise stored.damaged(*where, name, f"{str(v[name])[:40]!r} is not one of {', '.join(allowed)}")
    return Alert(
        id=stored.integer(v["id"], *where, "id", low=1),
        kind=v["kind"],
        state=v["state"],
        first_run=stored.integer(v["first_run"], *where, "first_run"),
        last_run=stored.integer(v["last_run"], *where, "last_run"),
        opened_at=stored.timestamp(v["opened_at"], *where, "opened_at"),
        state_since=stored.timestamp(v["state_since"], *where, "state_since"),
        of_alert=None if v["of_alert"] is None else stored.integer(v["of_alert"], *where, "of_alert"),
        fixed_run=None if v["fixed_run"] is None else stored.integer(v["fixed_run"], *where, "fixed_run"),
        good_nights=stored.integer(v["good_nights"], *where, "good_nights"),
        data=_checked_data(stored.json_object(v["data"], *where, "data"), where),
        **texts,
    )


def _checked_data(data: dict[str, Any], where: tuple) -> dict[str, Any]:
    """An alert's evidence, with the fields the bench reads checked for their types."""
    for key in ("effect_pct", "p_value", "baseline_value", "value"):
        stored.number(data.get(key), *where, f"data.{key}")
    for key in ("title", "cause", "unit", "reason", "bisect"):
        if key in data and not isinstance(data[key], str | None):
            raise stored.damaged(*where, f"data.{key}", f"a {type(data[key]).__name__}, not text")
    try:
        shlex.split(data.get("bisect") or "")
    except ValueError as exc:
        raise stored.damaged(*where, "data.bisect", f"not a shell command ({exc})") from None
    change = data.get("change") or []
    if not isinstance(change, list) or not all(isinstance(c, str) for c in change):
        raise stored.damaged(*where, "data.change", "not a list of text")
    if data.get("suggested_of") is not None:
        stored.integer(data["suggested_of"], *where, "data.suggested_of", low=1)
    drift = data.get("drift")
    if drift is not None:
        if not isinstance(drift, dict):
            raise stored.damaged(*where, "data.drift", f"a {type(drift).__name__}, not an object")
        stored.number(drift.get("effect_pct"), *where, "data.drift.effect_pct")
        for key in ("since_run", "nights"):
            stored.integer(drift.get(key, 0), *where, f"data.drift.{key}")
    return data


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


def update(store: ResultStore, alert: Alert, *, was: str | None = None) -> None:
    """Write back every field of `alert` but its key and first night; with `was`, only while the stored alert is
    still in state `was` (compare-and-set: of two changes made at once, one wins and the other gets an
    AlertError naming the state it found)."""
    cur = store.db.execute(
        "UPDATE alerts SET kind = ?, state = ?, last_run = ?, state_since = ?, owner = ?, note = ?, link = ?,"
        " reason = ?, of_alert = ?, fixed_run = ?, good_nights = ?, data = ? WHERE id = ?"
        + ("" if was is None else " AND state = ?") + " RETURNING id",
        (alert.kind, alert.state, alert.last_run, alert.state_since, alert.owner, alert.note, alert.link,
         alert.reason, alert.of_alert, alert.fixed_run, alert.good_nights, json.dumps(alert.data, default=str),
         alert.id, *([] if was is None else [was])),
    )  # fmt: skip
    if not cur.fetchall():
        now = store.db.execute("SELECT state FROM alerts WHERE id = ?", (alert.id,)).fetchone()
        raise AlertError(f"alert {alert.id} was changed meanwhile (it is {now[0] if now else 'gone'}, not {was}):"
                         " nothing done", hint=f"see `hilbench alerts show {alert.id}`, then try again")  # fmt: skip


def add_event(
    store: ResultStore, alert_id: int, event: str, *, run_id: int | None, actor: str, detail: str = ""
) -> None:
    """Record one change to an alert."""
    store.db.execute(
        "INSERT INTO alert_events (alert_id, run_id, at, event, actor, detail) VALUES (?,?,?,?,?,?)",
        (alert_id, run_id, now_text(), event, actor, detail),
    )


def events(store: ResultStore, alert_id: int) -> list[Event]:
    """An alert's changes, oldest first (a damaged row is a DamagedStore naming it)."""
    rows = store.db.execute(
        "SELECT alert_id, run_id, at, event, actor, detail, id FROM alert_events WHERE alert_id = ? ORDER BY id",
        (alert_id,),
    )
    return [_event(r, store) for r in rows.fetchall()]


def _event(row: tuple, store: ResultStore) -> Event:
    where = (store.label, "alert_events", row[6])
    return Event(
        alert_id=stored.integer(row[0], *where, "alert_id", low=1),
        run_id=None if row[1] is None else stored.integer(row[1], *where, "run_id"),
        at=stored.timestamp(row[2], *where, "at"),
        event=stored.text(row[3], *where, "event"),
        actor=stored.text(row[4], *where, "actor"),
        detail=stored.text(row[5], *where, "detail"),
    )


def events_of_runs(store: ResultStore, run_ids: Iterable[int]) -> list[Event]:
    """The changes the nightly made with runs `run_ids`, oldest first."""
    ids = list(run_ids)
    if not ids:
        return []
    rows = store.db.execute(
        "SELECT alert_id, run_id, at, event, actor, detail, id FROM alert_events"
        f" WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY id",
        ids,
    )
    return [_event(r, store) for r in rows.fetchall()]

"""Alerts in the results store (tables `alerts`, `alert_metrics` and `alert_events`, bench.store.schema): SQLite on
one bench host, or PostgreSQL shared by a lab's hosts, so an alert acknowledged on one host reads acknowledged on
every other. An alert is one cause on one device; its metrics are rows of `alert_metrics`. bench.alerts gives the
rows their meaning (states, triage, the nightly's findings)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.store import stored
from bench.store.database import Database

# the states an alert is stored in (bench.alerts.model says what moves it between them)
UNTRIAGED, ACKNOWLEDGED, INVALID, DOWNSTREAM, FIXED = "untriaged", "acknowledged", "invalid", "downstream", "fixed"
_COLUMNS = ("id, device, state, first_run, last_run, opened_at, state_since, owner, note, link, reason, of_alert,"
            " fixed_run, data")  # fmt: skip
_NAMES = tuple(name.strip() for name in _COLUMNS.split(","))
_TEXTS = ("device", "state", "owner", "note", "link", "reason")
_METRIC_COLUMNS = "alert_id, session, metric, kind, first_run, last_run, good_nights, recovered_run, data"
_EVENTS = "SELECT alert_id, run_id, at, event, actor, detail, id FROM alert_events"


@dataclass
class AlertMetricRow:
    """One metric an alert lists: which session and metric, its first and newest bad night, whether it has
    recovered, and its figures (bench.alerts.model.AlertMetric gives it its meaning)."""

    alert_id: int
    session: str
    metric: str
    kind: str  # regression, drift or failure
    first_run: int  # its first bad night
    last_run: int  # its newest bad night
    good_nights: int = 0  # nights in a row back inside the baseline since its last bad one
    recovered_run: int | None = None  # the run after which it was back for `fixed_after_nights` nights
    data: dict[str, Any] = field(default_factory=dict)  # title, unit, effect, p, baseline, figure, drift


@dataclass
class AlertRow:
    """One stored alert: one cause on one device (a fingerprint change, or a first bad night), the metrics it
    moved, and the alert's state (bench.alerts.model.Alert gives it its meaning)."""

    id: int
    device: str
    state: str
    first_run: int  # its first bad night
    last_run: int  # the newest bad night that joined it
    opened_at: str  # ISO-8601 UTC: the first night's start
    state_since: str  # when it entered its state
    owner: str = ""
    note: str = ""
    link: str = ""
    reason: str = ""  # why it is invalid
    of_alert: int | None = None  # the alert it is downstream of
    fixed_run: int | None = None  # the run that fixed it
    data: dict[str, Any] = field(default_factory=dict)  # the cause: change, components, attribution, bisect
    metrics: list[AlertMetricRow] = field(default_factory=list)  # oldest first


@dataclass(frozen=True)
class AlertEvent:
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
    """Now, ISO-8601 UTC (the alerts' timestamps)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class AlertStore:
    """Alerts, their metrics and their changes."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, alert_id: int) -> AlertRow | None:
        """Alert `alert_id`, or None."""
        return self.of_ids([alert_id]).get(alert_id)

    def select(self, *, states: Iterable[str] | None = None, device: str | None = None) -> list[AlertRow]:
        """Alerts (in `states`, on `device` when given), newest first."""
        where: list[str] = []
        params: list[Any] = []
        if states is not None:
            wanted = list(states)
            where.append(f"a.state IN ({','.join('?' * len(wanted)) or 'NULL'})")
            params += wanted
        if device:
            where.append("a.device = ?")
            params.append(device)
        return self._read(" AND ".join(where) or "1 = 1", params, newest_first=True)

    def of_ids(self, alert_ids: Iterable[int]) -> dict[int, AlertRow]:
        """Alert id -> alert, of those of `alert_ids` that exist."""
        ids = list(alert_ids)
        return {a.id: a for a in self._read(f"a.id IN ({', '.join('?' for _ in ids) or 'NULL'})", ids)}

    def of_metric(self, session: str, device: str, metric: str) -> AlertRow | None:
        """The newest alert of `device` that lists `metric` of `session` (one not fixed before a fixed one), or None."""
        row = self.db.execute(
            "SELECT a.id FROM alerts a JOIN alert_metrics m ON m.alert_id = a.id"
            " WHERE m.session = ? AND a.device = ? AND m.metric = ?"
            " ORDER BY CASE WHEN a.state = ? THEN 1 ELSE 0 END, a.id DESC LIMIT 1",
            (session, device, metric, FIXED),
        ).fetchone()
        return self.get(row[0]) if row else None

    def of_session(self, session: str) -> list[AlertRow]:
        """The alerts that list a metric of `session`, oldest first."""
        return self._read("a.id IN (SELECT alert_id FROM alert_metrics WHERE session = ?)", [session])

    def insert(self, alert: AlertRow) -> int:
        """Store a new alert and its metrics (its `id` is ignored); returns its id."""
        with self.db.tx():
            cur = self.db.execute(
                "INSERT INTO alerts (device, state, first_run, last_run, opened_at, state_since, owner, note, link,"
                " reason, of_alert, fixed_run, data) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                (alert.device, alert.state, alert.first_run, alert.last_run, alert.opened_at, alert.state_since,
                 alert.owner, alert.note, alert.link, alert.reason, alert.of_alert, alert.fixed_run,
                 json.dumps(alert.data, default=str)),
            )  # fmt: skip
            alert_id = int(cur.fetchall()[0][0])
            self._put_metrics(alert_id, alert.metrics)
        return alert_id

    def update(self, alert: AlertRow, *, was: str | None = None) -> bool:
        """Write back every field of `alert` but its device and first night, and its metrics; with `was`, only while
        the stored alert is still in state `was` (compare-and-set: of two changes made at once, one wins). Whether
        it was written."""
        with self.db.tx():
            cur = self.db.execute(
                "UPDATE alerts SET state = ?, first_run = ?, last_run = ?, state_since = ?, owner = ?, note = ?,"
                " link = ?, reason = ?, of_alert = ?, fixed_run = ?, data = ? WHERE id = ?"
                + ("" if was is None else " AND state = ?") + " RETURNING id",
                (alert.state, alert.first_run, alert.last_run, alert.state_since, alert.owner, alert.note, alert.link,
                 alert.reason, alert.of_alert, alert.fixed_run, json.dumps(alert.data, default=str), alert.id,
                 *([] if was is None else [was])),
            )  # fmt: skip
            written = bool(cur.fetchall())
            if written:
                self._put_metrics(alert.id, alert.metrics)
        return written

    def _put_metrics(self, alert_id: int, metrics: list[AlertMetricRow]) -> None:
        self.db.executemany(
            f"INSERT OR REPLACE INTO alert_metrics ({_METRIC_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
            [(alert_id, m.session, m.metric, m.kind, m.first_run, m.last_run, m.good_nights, m.recovered_run,
              json.dumps(m.data, default=str)) for m in metrics],
        )  # fmt: skip

    def add_event(self, alert_id: int, event: str, *, run_id: int | None, actor: str, detail: str = "") -> None:
        """Record one change to an alert."""
        self.db.execute(
            "INSERT INTO alert_events (alert_id, run_id, at, event, actor, detail) VALUES (?,?,?,?,?,?)",
            (alert_id, run_id, now_text(), event, actor, detail),
        )

    def events(self, alert_id: int) -> list[AlertEvent]:
        """An alert's changes, oldest first."""
        rows = self.db.execute(_EVENTS + " WHERE alert_id = ? ORDER BY id", (alert_id,))
        return [self._event(r) for r in rows.fetchall()]

    def events_of_runs(self, run_ids: Iterable[int]) -> list[AlertEvent]:
        """The changes made with runs `run_ids`, oldest first."""
        ids = list(run_ids)
        if not ids:
            return []
        rows = self.db.execute(_EVENTS + f" WHERE run_id IN ({','.join('?' * len(ids))}) ORDER BY id", ids)
        return [self._event(r) for r in rows.fetchall()]

    def _read(self, where: str, params: list[Any], *, newest_first: bool = False) -> list[AlertRow]:
        """The alerts matching `where` (on table `a`), each with its metrics, in one statement (an alert without
        metrics comes back with none, for bench.alerts.table to name)."""
        columns = ", ".join([*(f"a.{n}" for n in _NAMES), *(f"m.{n.strip()}" for n in _METRIC_COLUMNS.split(","))])
        rows = self.db.execute(
            f"SELECT {columns} FROM alerts a LEFT JOIN alert_metrics m ON m.alert_id = a.id WHERE {where}"
            f" ORDER BY a.id{' DESC' if newest_first else ''}, m.first_run, m.session, m.metric",
            params,
        ).fetchall()
        alerts: dict[int, AlertRow] = {}
        for r in rows:
            alert = alerts.get(r[0])
            if alert is None:
                alert = alerts[r[0]] = self._row(r[: len(_NAMES)])
            if r[len(_NAMES)] is not None:
                alert.metrics.append(self._metric(r[len(_NAMES) :]))
        return list(alerts.values())

    def _row(self, row: tuple) -> AlertRow:
        """A stored alert, each field checked for its type: a row changed outside the bench (a blob owner, a date
        that is not ISO-8601) is a DamagedStore naming the row and field (exit 2)."""
        where = (self.db.label, "alerts", row[0])
        v = dict(zip(_NAMES, row, strict=True))
        return AlertRow(
            id=stored.integer(v["id"], *where, "id", low=1),
            first_run=stored.integer(v["first_run"], *where, "first_run"),
            last_run=stored.integer(v["last_run"], *where, "last_run"),
            opened_at=stored.timestamp(v["opened_at"], *where, "opened_at"),
            state_since=stored.timestamp(v["state_since"], *where, "state_since"),
            of_alert=None if v["of_alert"] is None else stored.integer(v["of_alert"], *where, "of_alert"),
            fixed_run=None if v["fixed_run"] is None else stored.integer(v["fixed_run"], *where, "fixed_run"),
            data=stored.json_object(v["data"], *where, "data"),
            **{k: stored.text(v[k], *where, k) for k in _TEXTS},
        )

    def _metric(self, row: tuple) -> AlertMetricRow:
        """A stored metric of an alert, each field checked (a damaged row is a DamagedStore naming the alert and
        the metric)."""
        where = (self.db.label, "alert_metrics", f"{row[0]}/{str(row[1])[:40]}/{str(row[2])[:40]}")
        recovered = row[7]
        return AlertMetricRow(
            alert_id=stored.integer(row[0], *where, "alert_id", low=1),
            session=stored.text(row[1], *where, "session"),
            metric=stored.text(row[2], *where, "metric"),
            kind=stored.text(row[3], *where, "kind"),
            first_run=stored.integer(row[4], *where, "first_run"),
            last_run=stored.integer(row[5], *where, "last_run"),
            good_nights=stored.integer(row[6], *where, "good_nights"),
            recovered_run=None if recovered is None else stored.integer(recovered, *where, "recovered_run"),
            data=stored.json_object(row[8], *where, "data"),
        )

    def _event(self, row: tuple) -> AlertEvent:
        """A stored change to an alert, each field checked (a damaged row is a DamagedStore naming it)."""
        where = (self.db.label, "alert_events", row[6])
        return AlertEvent(
            alert_id=stored.integer(row[0], *where, "alert_id", low=1),
            run_id=None if row[1] is None else stored.integer(row[1], *where, "run_id"),
            at=stored.timestamp(row[2], *where, "at"),
            event=stored.text(row[3], *where, "event"),
            actor=stored.text(row[4], *where, "actor"),
            detail=stored.text(row[5], *where, "detail"),
        )

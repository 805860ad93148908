"""Alerts as the bench works with them, read and written through the store's alerts (bench.store.alerts):
each stored row becomes an `Alert` once its values are checked, an unknown id is an AlertError naming the store,
and a change made meanwhile by someone else wins over a stale one."""

from __future__ import annotations

import getpass
import os
import shlex
import socket
from collections.abc import Iterable
from typing import Any

from bench.alerts.model import DRIFT, FAILURE, REGRESSION, STATES, Alert, AlertError
from bench.store import stored
from bench.store.alerts import AlertRow
from bench.store.results import ResultStore

KINDS = (REGRESSION, DRIFT, FAILURE)


def who() -> str:
    """The person (or CI job) at this bench host: "user@host" (LG_HOSTNAME names the host, as for labgrid)."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        user = str(os.getuid())
    return f"{user}@{host}"


def checked(row: AlertRow, label: str) -> Alert:
    """The alert of a row of store `label`, its values checked: a row changed outside the bench (a kind or state the
    bench does not know, an effect that is text, an alert without metrics) is a DamagedStore naming the row and
    field (exit 2)."""
    where = (label, "alerts", row.id)
    if row.state not in STATES:
        raise stored.damaged(*where, "state", f"{str(row.state)[:40]!r} is not one of {', '.join(STATES)}")
    if not row.metrics:
        raise stored.damaged(*where, "metrics", "it lists no metric (table alert_metrics has none of it)")
    _check_cause(row.data, where)
    for m in row.metrics:
        at = (label, "alert_metrics", f"{m.alert_id}/{m.session[:40]}/{m.metric[:40]}")
        if m.kind not in KINDS:
            raise stored.damaged(*at, "kind", f"{str(m.kind)[:40]!r} is not one of {', '.join(KINDS)}")
        _check_figures(m.data, at)
    return Alert.of(row)


def _check_cause(data: dict[str, Any], where: tuple) -> None:
    """An alert's cause: the fields the bench reads checked for their types."""
    for key in ("cause", "bisect"):
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


def _check_figures(data: dict[str, Any], where: tuple) -> None:
    """A metric's figures: the fields the bench reads checked for their types."""
    for key in ("effect_pct", "p_value", "baseline_value", "value"):
        stored.number(data.get(key), *where, f"data.{key}")
    for key in ("title", "unit", "reason"):
        if key in data and not isinstance(data[key], str | None):
            raise stored.damaged(*where, f"data.{key}", f"a {type(data[key]).__name__}, not text")
    drift = data.get("drift")
    if drift is not None:
        if not isinstance(drift, dict):
            raise stored.damaged(*where, "data.drift", f"a {type(drift).__name__}, not an object")
        stored.number(drift.get("effect_pct"), *where, "data.drift.effect_pct")
        for key in ("since_run", "nights"):
            stored.integer(drift.get(key, 0), *where, f"data.drift.{key}")


def get(store: ResultStore, alert_id: int) -> Alert:
    """Alert `alert_id` (AlertError naming the store when there is none)."""
    row = store.alerts.get(alert_id)
    if row is None:
        raise AlertError(f"results store {store.label}: no alert {alert_id}", hint="see `hilbench alerts list`")
    return checked(row, store.label)


def select(store: ResultStore, *, states: Iterable[str] | None = None, device: str | None = None) -> list[Alert]:
    """Alerts (in `states`, on `device` when given), newest first."""
    return [checked(r, store.label) for r in store.alerts.select(states=states, device=device)]


def of_metric(store: ResultStore, session: str, device: str, metric: str) -> Alert | None:
    """The newest alert of `device` that lists `metric` of `session` (one not fixed before a fixed one), or None."""
    row = store.alerts.of_metric(session, device, metric)
    return checked(row, store.label) if row else None


def of_session(store: ResultStore, session: str) -> list[Alert]:
    """The alerts that list a metric of `session`, oldest first."""
    return [checked(r, store.label) for r in store.alerts.of_session(session)]


def update(store: ResultStore, alert: Alert, *, was: str | None = None) -> None:
    """Write back `alert` (its state, triage, newest night and metrics); with `was`, only while the stored alert is
    still in state `was` (compare-and-set: of two changes made at once, one wins and the other gets an
    AlertError naming the state it found)."""
    if store.alerts.update(alert, was=was):
        return
    now = store.alerts.get(alert.id)
    raise AlertError(f"alert {alert.id} was changed meanwhile (it is {now.state if now else 'gone'}, not {was}):"
                     " nothing done", hint=f"see `hilbench alerts show {alert.id}`, then try again")  # fmt: skip

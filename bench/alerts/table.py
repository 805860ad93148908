"""Alerts as the bench works with them, read and written through the store's alerts (bench.store.alerts):
each stored row becomes an `Alert`, and an unknown id is an AlertError naming the store."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Iterable

from bench.alerts.model import Alert, AlertError
from bench.store.results import ResultStore


def who() -> str:
    """The person (or CI job) at this bench host: "user@host" (LG_HOSTNAME names the host, as for labgrid)."""
    host = os.environ.get("LG_HOSTNAME") or socket.gethostname()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's user)
        user = str(os.getuid())
    return f"{user}@{host}"


def get(store: ResultStore, alert_id: int) -> Alert:
    """Alert `alert_id` (AlertError naming the store when there is none)."""
    row = store.alerts.get(alert_id)
    if row is None:
        raise AlertError(f"results store {store.label}: no alert {alert_id}", hint="see `hilbench alerts list`")
    return Alert.of(row)


def select(store: ResultStore, *, states: Iterable[str] | None = None, device: str | None = None) -> list[Alert]:
    """Alerts (in `states`, on `device` when given), newest first."""
    return [Alert.of(r) for r in store.alerts.select(states=states, device=device)]


def of_key(store: ResultStore, session: str, device: str, metric: str) -> Alert | None:
    """The newest alert of one session, device and metric, or None."""
    row = store.alerts.of_key(session, device, metric)
    return Alert.of(row) if row else None


def of_session(store: ResultStore, session: str) -> list[Alert]:
    """The newest alert of each device and metric of a session."""
    newest = {(r.device, r.metric): r for r in store.alerts.of_session(session)}
    return [Alert.of(r) for r in newest.values()]

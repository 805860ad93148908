"""Triage by hand (`hilbench alerts ack / invalid / downstream / fix`): each change checked against the alert's
state (bench.alerts.model) and kept in its history with who made it."""

from __future__ import annotations

from bench.alerts import table
from bench.alerts.model import ACKNOWLEDGED, DOWNSTREAM, FIXED, INVALID, OPEN, Alert, AlertError, check_change
from bench.store.alerts import now_text
from bench.store.results import ResultStore


def acknowledge(store: ResultStore, alert_id: int, owner: str, note: str, link: str = "") -> Alert:
    """Someone owns the alert: `owner`, `note` and an optional `link` (a bug)."""
    if not owner.strip():
        raise AlertError(f"alert {alert_id}: --owner is empty", hint="name who owns it: --owner NAME")
    alert = table.get(store, alert_id)
    check_change(alert, ACKNOWLEDGED)
    alert.owner, alert.note, alert.link = owner.strip(), note, link
    return _move(store, alert, ACKNOWLEDGED, f"owner {alert.owner}: {note}" + (f" ({link})" if link else ""))


def invalidate(store: ResultStore, alert_id: int, reason: str) -> Alert:
    """The alert is not the product's fault, because `reason`."""
    if not reason.strip():
        raise AlertError(f"alert {alert_id}: --reason is empty", hint="say why it is invalid: --reason TEXT")
    alert = table.get(store, alert_id)
    check_change(alert, INVALID)
    alert.reason = reason.strip()
    return _move(store, alert, INVALID, alert.reason)


def downstream(store: ResultStore, alert_id: int, of: int) -> Alert:
    """The alert is caused by alert `of` (which must exist, be another one, and not itself be downstream of it)."""
    alert = table.get(store, alert_id)
    check_change(alert, DOWNSTREAM)
    if of == alert_id:
        raise AlertError(f"alert {alert_id}: --of names the alert itself", hint="name the alert that causes it")
    root = table.get(store, of)
    chain, cause = [of], root
    while cause.of_alert is not None:  # refused: a cycle of any length
        if cause.of_alert == alert_id or cause.of_alert in chain:
            path = " -> ".join(f"#{n}" for n in [alert_id, *chain, cause.of_alert])
            raise AlertError(f"alert {alert_id}: downstream of alert {of} would make a cycle ({path})",
                             hint="name the alert at the root of the chain")  # fmt: skip
        chain.append(cause.of_alert)
        cause = table.get(store, cause.of_alert)
    alert.of_alert = of
    return _move(store, alert, DOWNSTREAM, f"of alert {of} ({root.device} {root.title})")


def fix(store: ResultStore, alert_id: int, run_id: int) -> Alert:
    """The alert was fixed by run `run_id` (which must exist and be later than the alert's first night)."""
    alert = table.get(store, alert_id)
    check_change(alert, FIXED)
    store.runs.run(run_id)  # a ConfigError naming the store when there is no such run
    if run_id <= alert.first_run:
        raise AlertError(f"alert {alert_id}: run {run_id} is not after its first night (run {alert.first_run})",
                         hint="name the run that showed it fixed")  # fmt: skip
    alert.fixed_run = run_id
    return _move(store, alert, FIXED, f"by run {run_id}")


def _move(store: ResultStore, alert: Alert, state: str, detail: str) -> Alert:
    was = alert.state
    alert.state, alert.state_since = state, now_text()
    if state in OPEN:
        alert.fixed_run = None
    table.update(store, alert, was=was)  # compare-and-set: a change made meanwhile wins, this one is refused
    store.alerts.add_event(alert.id, state, run_id=None, actor=table.who(), detail=f"{was} -> {state}: {detail}")
    return alert

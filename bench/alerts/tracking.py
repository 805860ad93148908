"""The nightly's side of alerts: each night's findings open, join, close or reopen alerts.

- A bad finding (a confirmed regression, drift or product failure) joins the open alert of its session, device and
  metric (a drift makes it a drift alert, in the state it has: a regression that keeps growing is the same alert,
  with its newest cumulative change); with none, it reopens the newest one when that was fixed within
  `reopen_nights` nights, else opens a new one, untriaged. A new alert whose fingerprint change (a model,
  firmware, agent bundle or OS image) is the same as an untriaged or acknowledged alert's on another device names
  that alert as the one it may be downstream of.
- A good finding (the metric back inside the baseline's spread, or the stage passed) counts towards closing the
  open alert: after `fixed_after_nights` in a row it is fixed, by the bench, with that night as the fixing run. An
  invalid alert stays invalid.

Recording a night twice changes nothing the second time."""

from __future__ import annotations

from collections.abc import Iterable

from bench.alerts import table
from bench.alerts.findings import Finding
from bench.alerts.model import ACKNOWLEDGED, DRIFT, FIXED, INVALID, OPEN, UNTRIAGED, Alert
from bench.results.thresholds import AlertRules
from bench.store.results import ResultStore


def record_night(store: ResultStore, findings: Iterable[Finding], rules: AlertRules, actor: str) -> None:
    """Apply one night's findings to the store's alerts (`actor` names the bench host's nightly in their history)."""
    for f in findings:
        current = table.of_key(store, f.session, f.device, f.metric)
        if f.bad:
            _bad(store, f, current, rules, actor)
        elif f.bad is False and current is not None:
            _good(store, f, current, rules, actor)


def _bad(store: ResultStore, f: Finding, current: Alert | None, rules: AlertRules, actor: str) -> None:
    if current is not None and current.last_run >= f.run_id:
        return  # this night was recorded already
    if current is not None and current.state in OPEN:
        current.last_run, current.good_nights = f.run_id, 0
        became = f.kind == DRIFT and current.kind != DRIFT
        if f.kind == DRIFT:
            current.kind, current.data["drift"] = DRIFT, f.evidence.get("drift")
        current.data["last"] = _brief(f)
        store.alerts.update(current)
        detail = ("now a drift: " if became else "") + _detail(f)
        store.alerts.add_event(current.id, "joined", run_id=f.run_id, actor=actor, detail=detail)
        return
    fixed_by = current.fixed_run if current is not None else None
    if (
        current is not None
        and fixed_by is not None
        and store.runs.nights(f.session, fixed_by, f.run_id) <= rules.reopen_nights
    ):
        current.state, current.state_since, current.last_run, current.good_nights = UNTRIAGED, f.started_at, f.run_id, 0
        current.fixed_run = None
        current.data["last"] = _brief(f)
        store.alerts.update(current)
        detail = f"the fix of run {fixed_by} did not hold: {_detail(f)}"
        store.alerts.add_event(current.id, "reopened", run_id=f.run_id, actor=actor, detail=detail)
        return
    alert = Alert(
        id=0, session=f.session, device=f.device, metric=f.metric, kind=f.kind, state=UNTRIAGED,
        first_run=f.first_run or f.run_id, last_run=f.run_id, opened_at=f.started_at, state_since=f.started_at,
        data=dict(f.evidence),
    )  # fmt: skip
    root = _same_change(store, alert)
    if root is not None:
        alert.data["suggested_of"] = root.id
    alert.id = store.alerts.insert(alert)
    detail = _detail(f) + (f"; the same change as alert {root.id} on {root.device}" if root else "")
    store.alerts.add_event(alert.id, "opened", run_id=f.run_id, actor=actor, detail=detail)


def _good(store: ResultStore, f: Finding, current: Alert, rules: AlertRules, actor: str) -> None:
    if current.state not in OPEN or current.state == INVALID or f.run_id <= current.last_run:
        return
    if f.run_id <= int(current.data.get("last_good") or 0):
        return  # this night was counted already
    current.good_nights += 1
    current.data["last_good"] = f.run_id
    if current.good_nights >= rules.fixed_after_nights:
        current.state, current.state_since, current.fixed_run = FIXED, f.started_at, f.run_id
        store.alerts.update(current)
        detail = f"back inside the baseline's spread for {current.good_nights} nights"
        store.alerts.add_event(current.id, "fixed", run_id=f.run_id, actor=actor, detail=detail)
        return
    store.alerts.update(current)


def _same_change(store: ResultStore, alert: Alert) -> Alert | None:
    """The oldest untriaged or acknowledged alert on another device whose step came with the same component change
    as `alert`'s (the same new model, firmware, agent bundle or OS image), or None."""
    mine = {(k, str(v[1])) for k, v in (alert.data.get("components") or {}).items() if v[1]}
    if not mine:
        return None
    live = table.select(store, states=(UNTRIAGED, ACKNOWLEDGED))  # not one marked invalid or downstream itself
    candidates = [a for a in live if a.device != alert.device]
    for other in sorted(candidates, key=lambda a: a.id):
        theirs = {(k, str(v[1])) for k, v in (other.data.get("components") or {}).items() if v[1]}
        if mine & theirs:
            return other
    return None


def _brief(f: Finding) -> dict:
    """The newest bad night's figures, kept with the alert."""
    keys = ("effect_pct", "p_value", "value", "reason")
    return {"run_id": f.run_id, **{k: f.evidence.get(k) for k in keys if k in f.evidence}}


def _detail(f: Finding) -> str:
    effect = f.evidence.get("effect_pct")
    what = f"{effect:+.1f}%" if isinstance(effect, int | float) else str(f.evidence.get("reason", ""))[:120]
    if drift := f.evidence.get("drift"):
        what += f" since run {drift['since_run']} ({drift['nights']} nights)"
    return f"run {f.run_id}: {f.evidence.get('title', f.metric)} {what}".strip()

"""The nightly's side of alerts: each night's findings open, join, close or reopen alerts, one alert per cause.

- The night's bad findings (confirmed regressions, drifts, product failures) of one device that share a cause
  form one group: the same fingerprint change (a new model, firmware, agent bundle or OS image), or the same first
  bad night (tonight for a new step, a drift's first night, the first night of the open alert that already lists
  the metric).
- A group joins the open alerts that list its metrics (each metric its own; a metric they do not list yet is
  added to the oldest of them). With none, it joins the open alert of the device whose fingerprint change is the
  group's; else it reopens the newest alert listing one of its metrics when that was fixed within
  `reopen_nights` nights; else it opens a new alert, untriaged, listing every metric of the group. A drift makes
  its metric a drift, in the alert's state: a regression that keeps growing stays in its alert. A new alert whose
  change is an untriaged or acknowledged alert's on another device names that alert as the one it may be
  downstream of.
- A good finding (the metric back inside the baseline's spread, or the stage passed) counts towards the metric's
  recovery: after `fixed_after_nights` in a row it is marked recovered inside its alert; when every metric has
  recovered the alert is fixed, by the bench, with that night as the fixing run. A bad night in between starts
  the metric's count again. An invalid alert stays invalid.

Recording a night twice changes nothing the second time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.alerts import table
from bench.alerts.findings import Finding
from bench.alerts.model import ACKNOWLEDGED, DRIFT, FIXED, INVALID, OPEN, UNTRIAGED, Alert, AlertMetric
from bench.results.thresholds import AlertRules
from bench.store.results import ResultStore

# evidence that belongs to the alert's cause, not to one of its metrics
CAUSE_KEYS = ("change", "components", "cause", "bisect", "fingerprint")


@dataclass
class _Bad:
    """A bad finding, with the newest alert that lists its metric (if any)."""

    finding: Finding
    current: Alert | None

    @property
    def open_alert(self) -> Alert | None:
        return self.current if self.current is not None and self.current.state in OPEN else None

    def causes(self) -> set[tuple[Any, ...]]:
        """What it shares with the night's other bad findings of its device when they have one cause."""
        f = self.finding
        out: set[tuple[Any, ...]] = set()
        if components := _components(f.evidence.get("components")):
            out.add(("change", components))
        first: Any = f.first_run or "tonight"
        if (alert := self.open_alert) is not None:
            out.add(("alert", alert.id))
            metric = alert.metric(f.session, f.metric)
            first = metric.first_run if metric is not None else first
        out.add(("first night", first))
        return out


@dataclass
class _Group:
    device: str
    members: list[_Bad] = field(default_factory=list)


def record_night(store: ResultStore, findings: Iterable[Finding], rules: AlertRules, actor: str) -> None:
    """Apply one night's findings to the store's alerts (`actor` names the bench host's nightly in their history)."""
    found = list(findings)
    bad = []
    for f in (f for f in found if f.bad):
        current = table.of_metric(store, f.session, f.device, f.metric)
        metric = current.metric(f.session, f.metric) if current is not None else None
        if metric is not None and metric.last_run >= f.run_id:
            continue  # this night was recorded already
        bad.append(_Bad(f, current))
    for group in _groups(bad):
        _record_group(store, group, rules, actor)
    for f in found:
        if f.bad is False:
            _good(store, f, rules, actor)


def _groups(bad: list[_Bad]) -> list[_Group]:
    """The bad findings of each device joined into groups that share a cause (any key in common)."""
    groups: list[_Group] = []
    keys: list[set] = []
    for b in bad:
        mine = {(b.finding.device, *k) for k in b.causes()}
        hits = [i for i, theirs in enumerate(keys) if theirs & mine]
        merged = _Group(b.finding.device, [m for i in hits for m in groups[i].members] + [b])
        merged_keys = set().union(mine, *(keys[i] for i in hits))
        groups = [g for i, g in enumerate(groups) if i not in hits] + [merged]
        keys = [k for i, k in enumerate(keys) if i not in hits] + [merged_keys]
    return groups


def _record_group(store: ResultStore, group: _Group, rules: AlertRules, actor: str) -> None:
    # each alert read again: an earlier group of the night may have changed it (reopened a fixed one)
    attached = {i: table.get(store, i) for i in {b.open_alert.id for b in group.members if b.open_alert is not None}}
    if not attached and (same := _open_with_change(store, group)) is not None:
        attached[same.id] = same
    if not attached and (reopen := _reopenable(store, group, rules)) is not None:
        reopen = table.get(store, reopen.id)
        if reopen.state not in OPEN:
            _reopen(store, reopen, [b.finding for b in group.members], actor)
            return
        attached[reopen.id] = reopen
    if attached:
        oldest = min(attached)
        by_alert: dict[int, list[Finding]] = {}
        for b in group.members:
            target = b.open_alert.id if b.open_alert is not None else oldest
            by_alert.setdefault(target, []).append(b.finding)
        for alert_id, found in by_alert.items():
            _join(store, attached[alert_id], found, actor)
        return
    _open(store, group, actor)


def _join(store: ResultStore, alert: Alert, found: list[Finding], actor: str) -> None:
    """Bad findings join open `alert`: each metric's newest bad night moves on (a recovered one is bad again)."""
    became = []
    for f in found:
        metric = alert.metric(f.session, f.metric)
        if metric is None:
            alert.metrics.append(_metric(alert.id, f))
            continue
        if f.kind == DRIFT and metric.kind != DRIFT:
            became.append(f)
        _bad_again(metric, f)
    _update_span(alert)
    store.alerts.update(alert)
    _events(store, alert.id, "joined", found, actor, became)


def _reopen(store: ResultStore, alert: Alert, found: list[Finding], actor: str) -> None:
    """A fixed alert whose step came back soon after its fix: untriaged again, its owner and note kept."""
    fixed_by = alert.fixed_run
    for f in found:
        metric = alert.metric(f.session, f.metric)
        if metric is None:
            alert.metrics.append(_metric(alert.id, f))
        else:
            _bad_again(metric, f)
    first = min(found, key=lambda f: f.run_id)
    alert.state, alert.state_since, alert.fixed_run = UNTRIAGED, first.started_at, None
    _update_span(alert)
    store.alerts.update(alert)
    _events(store, alert.id, "reopened", found, actor, [], prefix=f"the fix of run {fixed_by} did not hold: ")


def _open(store: ResultStore, group: _Group, actor: str) -> None:
    found = [b.finding for b in group.members]
    lead = found[0]
    cause = {k: lead.evidence[k] for k in CAUSE_KEYS if k in lead.evidence}
    cause["cause"] = next((f.evidence["cause"] for f in found if f.evidence.get("cause")), cause.get("cause", ""))
    first = min(found, key=lambda f: f.run_id)
    alert = Alert(
        id=0, device=group.device, state=UNTRIAGED, first_run=0, last_run=0, opened_at=first.started_at,
        state_since=first.started_at, data=cause, metrics=[_metric(0, f) for f in found],
    )  # fmt: skip
    _update_span(alert)
    root = _same_change(store, alert)
    if root is not None:
        alert.data["suggested_of"] = root.id
    alert.id = store.alerts.insert(alert)
    suffix = f"; the same change as alert {root.id} on {root.device}" if root else ""
    _events(store, alert.id, "opened", found, actor, [], suffix=suffix)


def _good(store: ResultStore, f: Finding, rules: AlertRules, actor: str) -> None:
    """A night back inside the baseline's spread for one metric of an open alert."""
    alert = table.of_metric(store, f.session, f.device, f.metric)
    if alert is None or alert.state not in OPEN or alert.state == INVALID:
        return
    metric = alert.metric(f.session, f.metric)
    if metric is None or metric.recovered_run is not None or f.run_id <= metric.last_run:
        return
    if f.run_id <= int(metric.data.get("last_good") or 0):
        return  # this night was counted already
    metric.good_nights += 1
    metric.data["last_good"] = f.run_id
    if metric.good_nights < rules.fixed_after_nights:
        store.alerts.update(alert)
        return
    metric.recovered_run = f.run_id
    back = f"back inside the baseline's spread for {metric.good_nights} nights"
    if any(m.recovered_run is None for m in alert.metrics):
        store.alerts.update(alert)
        store.alerts.add_event(alert.id, "recovered", run_id=f.run_id, actor=actor, detail=f"{metric.title} {back}")
        return
    alert.state, alert.state_since, alert.fixed_run = FIXED, f.started_at, f.run_id
    store.alerts.update(alert)
    what = "every metric" if len(alert.metrics) > 1 else metric.title
    store.alerts.add_event(alert.id, "fixed", run_id=f.run_id, actor=actor, detail=f"{what} {back}")


def _metric(alert_id: int, f: Finding) -> AlertMetric:
    """A metric of an alert, from its first bad finding."""
    figures = {k: v for k, v in f.evidence.items() if k not in CAUSE_KEYS}
    return AlertMetric(alert_id=alert_id, session=f.session, metric=f.metric, kind=f.kind,
                       first_run=f.first_run or f.run_id, last_run=f.run_id, data=figures)  # fmt: skip


def _bad_again(metric: AlertMetric, f: Finding) -> None:
    """A metric the alert lists is bad on finding `f`'s night: its count of good nights starts again."""
    metric.last_run, metric.good_nights, metric.recovered_run = f.run_id, 0, None
    if f.kind == DRIFT:
        metric.kind, metric.data["drift"] = DRIFT, f.evidence.get("drift")
    metric.data["last"] = _brief(f)


def _update_span(alert: Alert) -> None:
    alert.first_run = min(m.first_run for m in alert.metrics)
    alert.last_run = max(m.last_run for m in alert.metrics)


def _open_with_change(store: ResultStore, group: _Group) -> Alert | None:
    """The oldest open alert of the group's device whose fingerprint change is the group's (the same cause seen on
    a later night through other metrics), or None."""
    changes = {_components(b.finding.evidence.get("components")) for b in group.members} - {frozenset()}
    if not changes:
        return None
    for alert in sorted(table.select(store, states=OPEN, device=group.device), key=lambda a: a.id):
        if _components(alert.data.get("components")) in changes:
            return alert
    return None


def _reopenable(store: ResultStore, group: _Group, rules: AlertRules) -> Alert | None:
    """The newest fixed alert that lists one of the group's metrics, fixed within `reopen_nights` nights."""
    for b in sorted(group.members, key=lambda b: -(b.current.id if b.current else 0)):
        alert, f = b.current, b.finding
        if alert is None or alert.state != FIXED or alert.fixed_run is None:
            continue
        if store.runs.nights(f.session, alert.fixed_run, f.run_id) <= rules.reopen_nights:
            return alert
    return None


def _same_change(store: ResultStore, alert: Alert) -> Alert | None:
    """The oldest untriaged or acknowledged alert on another device whose step came with the same component change
    as `alert`'s (the same new model, firmware, agent bundle or OS image), or None."""
    mine = _components(alert.data.get("components"))
    if not mine:
        return None
    live = table.select(store, states=(UNTRIAGED, ACKNOWLEDGED))  # not one marked invalid or downstream itself
    for other in sorted((a for a in live if a.device != alert.device), key=lambda a: a.id):
        if mine & _components(other.data.get("components")):
            return other
    return None


def _components(value: Any) -> frozenset[tuple[str, str]]:
    """(field, new value) of each component a fingerprint change names (field -> [before, now])."""
    if not isinstance(value, dict):
        return frozenset()
    return frozenset((k, str(v[1])) for k, v in value.items() if isinstance(v, list | tuple) and len(v) == 2 and v[1])


def _events(store: ResultStore, alert_id: int, event: str, found: list[Finding], actor: str, became: list[Finding],
            prefix: str = "", suffix: str = "") -> None:  # fmt: skip
    """One event per run of the night that touched the alert, naming that run's metrics."""
    by_run: dict[int, list[Finding]] = {}
    for f in found:
        by_run.setdefault(f.run_id, []).append(f)
    for run_id, fs in sorted(by_run.items()):
        words = [("now a drift: " if f in became else "") + _detail(f) for f in fs]
        detail = f"{prefix}run {run_id}: {'; '.join(words)}{suffix}"
        store.alerts.add_event(alert_id, event, run_id=run_id, actor=actor, detail=detail)


def _brief(f: Finding) -> dict:
    """The newest bad night's figures, kept with the metric."""
    keys = ("effect_pct", "p_value", "value", "reason")
    return {"run_id": f.run_id, **{k: f.evidence.get(k) for k in keys if k in f.evidence}}


def _detail(f: Finding) -> str:
    effect = f.evidence.get("effect_pct")
    what = f"{effect:+.1f}%" if isinstance(effect, int | float) else str(f.evidence.get("reason", ""))[:120]
    if drift := f.evidence.get("drift"):
        what += f" since run {drift['since_run']} ({drift['nights']} nights)"
    return f"{f.evidence.get('title', f.metric)} {what}".strip()

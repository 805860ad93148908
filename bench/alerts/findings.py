"""What one night says about each device, session and metric, in the form alerts are kept from: a confirmed
regression, drift or product failure (bad), a night back inside the baseline's spread (good), or nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.alerts.model import DRIFT, FAILURE, REGRESSION
from bench.bundles.fingerprint import changes
from bench.results.bisect import offer
from bench.results.verdict import IMPROVED, UNCHANGED, Verdict
from bench.results.verdict import REGRESSION as CONFIRMED
from bench.store.results import ResultStore

# fingerprint fields whose change names what a step came with (and matches two devices' steps to one change)
COMPONENT_FIELDS = ("model_sha256", "firmware_sha256", "agent_bundle", "os_image")
# a product failure's alert has this metric, with its stage ("product failure: faults")
FAILURE_METRIC = "product failure"


@dataclass(frozen=True)
class Finding:
    """One night's word on one device, session and metric."""

    session: str
    device: str
    metric: str
    run_id: int
    started_at: str
    bad: bool | None  # a confirmed regression, drift or product failure / back inside the baseline / says nothing
    kind: str = REGRESSION
    evidence: dict[str, Any] = field(default_factory=dict)
    first_run: int | None = None  # a drift's first night (else this night)


def findings_of_verdicts(store: ResultStore, run_id: int, verdicts: list[Verdict]) -> list[Finding]:
    """The findings of a judged session run: each confirmed regression or drift (bad, with its evidence, the
    fingerprint change against its newest baseline run, the attribution the nightly stored, and the bisect
    command), each unchanged or improved metric (good); the other verdicts say nothing."""
    row = store.runs.run(run_id)
    session = row.session or ""
    causes = {d.name: d.info.get("cause") or {} for d in store.runs.devices(run_id)}
    prints = store.verdicts.fingerprints(run_id)
    out = []
    for v in verdicts:
        if v.status in (UNCHANGED, IMPROVED):
            out.append(Finding(session, v.device, v.metric, run_id, row.started_at, False))
        elif v.status == CONFIRMED:
            base_run = max(v.baseline_runs) if v.baseline_runs else None
            now = prints.get(v.device, {})
            then = store.verdicts.fingerprints(base_run).get(v.device) if base_run is not None else None
            cause = causes.get(v.device, {})
            base_rev = store.runs.run(base_run).git_rev if base_run is not None else None
            session_file = str(row.config.get("session_file") or f"{session or 'SESSION'}.mcap")
            evidence = {
                "title": v.title, "unit": v.unit, "effect_pct": v.effect_pct, "p_value": v.p_value,
                "baseline_value": v.baseline_value, "spread": v.spread, "value": v.run_value,
                "confirm_value": v.confirm_value, "reason": v.reason, "baseline_run": base_run,
                "change": changes(now, then), "components": components(now, then),
                "cause": cause.get("text", "") if cause.get("metric") == v.metric else "",
                "bisect": offer(v.device, session_file, v.metric, (base_rev, row.git_rev)),
            }  # fmt: skip
            if v.is_drift:
                evidence["drift"] = {"since_run": v.drift_since, "nights": v.drift_nights, "effect_pct": v.effect_pct}
            kind = DRIFT if v.is_drift else REGRESSION
            out.append(Finding(session, v.device, v.metric, run_id, row.started_at, True, kind, evidence,
                               v.drift_since if v.is_drift else None))  # fmt: skip
    return out


def failure_finding(store: ResultStore, session: str, device: str, run_id: int, stage: str, why: str) -> Finding:
    """A product failure of `device` in `stage` of run `run_id` (bad), with the fingerprint it ran."""
    now = store.verdicts.fingerprints(run_id).get(device, {})
    evidence = {"title": f"{FAILURE_METRIC} in {stage}", "reason": why, "change": [], "components": {},
                "fingerprint": {k: now.get(k) for k in COMPONENT_FIELDS if now.get(k)}}  # fmt: skip
    started = store.runs.run(run_id).started_at
    return Finding(session, device, f"{FAILURE_METRIC}: {stage}", run_id, started, True, FAILURE, evidence)


def passed_finding(store: ResultStore, session: str, device: str, run_id: int, stage: str) -> Finding:
    """`device` passed `stage` of run `run_id` (good for an alert of a product failure there)."""
    started = store.runs.run(run_id).started_at
    return Finding(session, device, f"{FAILURE_METRIC}: {stage}", run_id, started, False, FAILURE)


def components(now: dict[str, Any], then: dict[str, Any] | None) -> dict[str, list[Any]]:
    """field -> [before, now] of each deployed component (model, firmware, agent bundle, OS image) that changed."""
    if then is None:
        return {}
    return {k: [then.get(k), now.get(k)] for k in COMPONENT_FIELDS if then.get(k) != now.get(k)}

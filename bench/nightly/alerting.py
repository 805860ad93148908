"""The nightly's alerts: each session run's confirmed regressions and drifts, and each device's product failures,
recorded as findings (bench.alerts), then the night's alerts split into new and known."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from bench.alerts.findings import Finding, failure_finding, findings_of_verdicts, passed_finding
from bench.alerts.night import NightAlerts, night_alerts
from bench.alerts.tracking import record_night
from bench.core.outcomes import FailureClass, Outcome
from bench.nightly.confirm import Confirmation
from bench.results.thresholds import AlertRules
from bench.store.results import ResultStore


def night_findings(
    store: ResultStore,
    confirmations: Mapping[str, Confirmation],
    replay_runs: Mapping[str, int],
    ota_run: int | None = None,
    ota_outcomes: Mapping[str, Mapping[str, Outcome]] | None = None,
) -> list[Finding]:
    """The night's findings: the verdicts of each session run; each device's class in each session's replay (its
    retry's, when it was retried); and in the update and fault stages (`ota_outcomes`: stage -> device -> class)
    of the update-and-faults run. A product failure is bad; a pass is good for an alert of one there."""
    out: list[Finding] = []
    for conf in confirmations.values():
        out += findings_of_verdicts(store, conf.run_id, conf.verdicts)
    for session, run_id in replay_runs.items():
        for dev in store.runs.devices(run_id):
            stored = (dev.info.get("retry") or {}).get("outcome") or dev.info.get("outcome")
            outcome = Outcome.from_json(stored) if stored else None
            out += _of_outcome(store, session, dev.name, run_id, "replay", outcome)
    if ota_run is not None:
        session = store.runs.run(ota_run).session or ""
        for stage, devices in (ota_outcomes or {}).items():
            for device, outcome in devices.items():
                out += _of_outcome(store, session, device, ota_run, stage, outcome)
    return out


def _of_outcome(
    store: ResultStore, session: str, device: str, run_id: int, stage: str, outcome: Outcome | None
) -> list[Finding]:
    if outcome is None:
        return []
    if outcome.cls == FailureClass.PRODUCT:
        return [failure_finding(store, session, device, run_id, stage, outcome.reason)]
    if outcome.cls == FailureClass.PASS:
        return [passed_finding(store, session, device, run_id, stage)]
    return []


def record_alerts(store: ResultStore, findings: list[Finding], rules: AlertRules) -> NightAlerts:
    """Record the night's findings as alerts and return the night's alerts (new, known, fixed, failing)."""
    record_night(store, findings, rules, f"nightly on {socket.gethostname()}")
    return night_alerts(store, sorted({f.run_id for f in findings}), rules)

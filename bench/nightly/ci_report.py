"""The nightly's CI files' content (bench.ci): its sessions' verdicts and figures, each device's outcome, its
pages, and where its time went."""

from __future__ import annotations

import datetime as dt

from bench.alerts.night import NightAlerts
from bench.ci.facts import (
    AlertLine,
    CiReport,
    Figure,
    alert_cases,
    judged_runs,
    outcome_cases,
    run_figures,
    verdict_cases,
)
from bench.nightly.orchestration import NightlyResult
from bench.nightly.publish import OTA_SESSION
from bench.results.thresholds import Thresholds
from bench.results.verdict import REGRESSION, Verdict
from bench.store.results import ResultStore


def nightly_report(result: NightlyResult, store: ResultStore, thresholds: Thresholds) -> CiReport:
    """What the nightly's summary, JUnit and metrics files say."""
    runs = [r for r in result.runs if r.session != OTA_SESSION]
    judged = judged_runs([(r.session, r.run_id, r.verdicts) for r in runs], thresholds)
    figures: list[Figure] = []
    for run in runs:
        mine = run_figures(store, run.run_id)
        retry = result.retries.get(run.session)
        if retry is not None:  # a retried device's figures are its retry's
            again = run_figures(store, retry, run_kind=store.runs.run(run.run_id).kind)
            retried = {f.device for f in again}
            mine = [f for f in mine if f.device not in retried] + again
        figures += mine
    regressions = [j for j in judged if j.verdict.status == REGRESSION]
    if regressions:
        headline = f"{len(regressions)} regression(s): " + "; ".join(
            f"{j.verdict.device} {j.verdict.title} ({j.session}{drift_words(j.verdict)})" for j in regressions
        )
    else:
        headline = "No regression. " + "; ".join(f"{r.session}: {r.note}" for r in runs if r.note)
    notes = [f"{name} left the run at {why}" for name, why in result.dropped.items()]
    notes += [f"{name} skipped: {why}" for name, why in result.skipped.items()]
    for session, conf in result.confirmations.items():
        notes += [f"{device} ({session}): {cause}" for device, cause in conf.causes.items()]
    for run in runs:
        notes += [f"first bad build on {device}: `{command}`" for device, command in run.bisect.items()]
    alerts = alert_lines(result.alerts) if result.alerts is not None else []
    pages = [(f"{r.session} (run {r.run_id})", r.page) for r in result.runs if r.page is not None]
    if result.health_page is not None:
        pages.append(("device health", result.health_page))
    return CiReport(
        job="nightly",
        title=f"hilbench nightly {result.started}",
        exit_code=int(result.exit_code),
        headline=headline,
        judged=judged,
        figures=figures,
        cases=[
            *verdict_cases("nightly", judged),
            *outcome_cases("nightly", result.outcomes()),
            *alert_cases("nightly", alerts),
        ],
        alerts=alerts,
        pages=pages,
        notes=notes,
        timings=[(f"stage {s.name}", s.seconds) for s in result.stages],
        started=dt.datetime.strptime(result.started, "%Y%m%d-%H%M%S").astimezone(),
    )


def drift_words(verdict: Verdict) -> str:
    """ "; drift +16% since run 12" for a drift, else ""."""
    if not verdict.is_drift or verdict.effect_pct is None:
        return ""
    return f"; drift {verdict.effect_pct:+.0f}% since run {verdict.drift_since}"


def alert_lines(found: NightAlerts) -> list[AlertLine]:
    """The night's alerts for the CI files, one line each: new ones, known ones it joined, fixed ones, and overdue
    ones of any night, each once, with every metric it lists."""
    lines: dict[int, AlertLine] = {}
    overdue = {a.id for a in found.overdue}
    failing = {a.id for a in found.failing}
    for new, alerts in ((True, found.new), (False, [*found.known, *found.fixed, *found.overdue])):
        for a in alerts:
            extra = [f"owner {a.owner}" if a.owner else "", a.link, f"of #{a.of_alert}" if a.of_alert else ""]
            metrics = "; ".join(m.brief() for m in a.metrics)
            lines.setdefault(a.id, AlertLine(a.id, a.state, new, a.device, ", ".join(a.sessions), metrics,
                                             a.age_days(found.now), a.id in overdue, "; ".join(x for x in extra if x),
                                             a.id in failing, len(a.metrics)))  # fmt: skip
    return list(lines.values())

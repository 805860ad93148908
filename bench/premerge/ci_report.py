"""The pre-merge check's CI files' content (bench.ci): the candidate's final verdicts, the median figures of each
build's replays, each device's outcome and where the time went."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bench.ci.facts import CiReport, judged_runs, median_figures, outcome_cases, run_figures, verdict_cases
from bench.core.outcomes import FailureClass
from bench.premerge.interleave import KINDS, CheckResult
from bench.premerge.plan import BASE, CANDIDATE
from bench.results.thresholds import Thresholds
from bench.results.verdict import INCONCLUSIVE, REGRESSION
from bench.store.results import ResultStore

FLEET_BUILD = "the fleet's build"
FAILED_RUN = (FailureClass.PRODUCT, FailureClass.INFRASTRUCTURE)  # the verdicts say the rest


def check_report(
    result: CheckResult, store: ResultStore, thresholds: Thresholds, started: dt.datetime, logs: Path
) -> CiReport:
    """What the check's summary, JUnit and metrics files say."""
    judged = judged_runs([(s.session, s.runs[CANDIDATE][-1], s.verdicts) for s in result.sessions if s.verdicts],
                         thresholds)  # fmt: skip
    figures = []
    for s in result.sessions:
        for side, build in ((BASE, FLEET_BUILD), (CANDIDATE, result.candidate)):
            figures += median_figures(f for run in s.runs[side] for f in run_figures(store, run, run_kind=KINDS[side],
                                                                                     build=build))  # fmt: skip
    worse = [j for j in judged if j.verdict.status == REGRESSION]
    busy = [j for j in judged if j.verdict.status == INCONCLUSIVE]
    if worse:
        headline = f"{result.candidate} is slower or bigger than {FLEET_BUILD}: " + "; ".join(
            f"{j.verdict.device} {j.verdict.title} {j.verdict.effect_pct or 0:+.1f}%" for j in worse
        )
    elif busy:
        headline = (f"{result.candidate}: no regression found, but inconclusive on "
                    + ", ".join(sorted({f"{j.verdict.device} {j.verdict.metric}" for j in busy})))  # fmt: skip
    else:
        headline = (f"{result.candidate}: no judged metric worse than {FLEET_BUILD} in a majority of "
                    f"{result.runs_per_build} interleaved replays each")  # fmt: skip
    notes = [f"{d}: {o.label}" for d, o in sorted(result.device_outcomes().items()) if o.cls in FAILED_RUN]
    notes.append(f"logs: {logs}")
    return CiReport(
        job="check", title=f"hilbench check: {result.candidate}", exit_code=result.exit_code, headline=headline,
        judged=judged, figures=figures,
        cases=verdict_cases("check", judged) + outcome_cases("check", result.device_outcomes()),
        notes=notes, timings=result.timings, started=started,
    )  # fmt: skip

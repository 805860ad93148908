"""What the CI files say, gathered once: the job's verdicts, the figures of its runs, its test cases, its alerts,
its pages and where its time went. The writers (summary_md, junit, openmetrics) only format a `CiReport`."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.core.outcomes import FailureClass, Outcome
from bench.measure.catalogue import BENCH, DEVICE, metric
from bench.results.thresholds import Thresholds
from bench.results.verdict import (
    COLLECTING,
    IMPROVED,
    INCONCLUSIVE,
    NO_DATA,
    NOT_APPLICABLE,
    NOT_ENOUGH,
    NOT_REPRODUCED,
    REGRESSION,
    SUSPECTED,
    UNCHANGED,
    Verdict,
)
from bench.store.results import ResultStore

PASSED, FAILED, SKIPPED, ERROR = "passed", "failed", "skipped", "error"
BASELINE = "-baseline"  # the run kind of a job's baseline replays ends so (check-baseline)
# the clock a figure is on (the `clock` label): the bench's, the device's, an icount guest's own, or none (a count)
GUEST = "guest"
NONE = "none"
# verdict status -> JUnit case status: a regression fails; what was not judged is skipped with its reason
CASE_OF = {
    REGRESSION: FAILED,
    SUSPECTED: FAILED,
    INCONCLUSIVE: SKIPPED,
    COLLECTING: SKIPPED,
    NO_DATA: SKIPPED,
    NOT_ENOUGH: SKIPPED,
    NOT_APPLICABLE: SKIPPED,
    UNCHANGED: PASSED,
    IMPROVED: PASSED,
    NOT_REPRODUCED: PASSED,
}


@dataclass(frozen=True)
class Figure:
    """One stored figure of one device in one run (or the median over a job's replays of one build)."""

    device: str
    kind: str  # the device's kind (esp32c6, pi5, ...)
    session: str
    metric: str  # the stored measurement's name (bench.measure.catalogue)
    clock: str  # bench, device, guest or none
    unit: str
    value: float
    run_kind: str  # replay, check, check-baseline, bisect, ...
    build: str = ""  # which build of a check or a bisection it measured ("" for a nightly)


@dataclass(frozen=True)
class Judged:
    """One verdict of a job, with the session and run it judged."""

    session: str
    run_id: int
    verdict: Verdict
    measurement: str  # the stored figure the verdict's rule judges (bench.results.thresholds)

    @property
    def changed(self) -> bool:
        """Whether it moved: a regression, an improvement, one the replay did not reproduce, or one the bench could
        not tell (inconclusive). Not judging (no data, too few samples, n/a, collecting) is no change."""
        return self.verdict.status in (REGRESSION, SUSPECTED, IMPROVED, NOT_REPRODUCED, INCONCLUSIVE)


@dataclass(frozen=True)
class Case:
    """One JUnit test case: one device, session and judged metric (or a device's whole run, or a bisect step)."""

    suite: str
    classname: str
    name: str
    status: str  # PASSED, FAILED, SKIPPED, ERROR
    message: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class AlertLine:
    """An alert the job opened, joined or fixed, with its state (untriaged, acknowledged, ...): one cause on one
    device, and every metric it lists."""

    id: int
    state: str
    new: bool
    device: str
    session: str  # its metrics' sessions
    metric: str  # its metrics with their effects, for people ("inference P50 +41.0%; decision P50 +38.2%")
    age_days: float = 0.0  # in its state
    overdue: bool = False  # untriaged for longer than the rules allow
    text: str = ""  # its owner, link, the alert it is downstream of
    failing: bool = False  # it makes the job exit 1
    metrics: int = 1  # how many metrics it lists


@dataclass
class CiReport:
    """Everything the three CI files of one job say."""

    job: str  # nightly, check, bisect
    title: str
    exit_code: int
    headline: str  # one line: what the job found
    judged: list[Judged] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    alerts: list[AlertLine] = field(default_factory=list)
    pages: list[tuple[str, Path]] = field(default_factory=list)  # (what, the page)
    notes: list[str] = field(default_factory=list)
    timings: list[tuple[str, float]] = field(default_factory=list)  # (what took the time, seconds)
    started: dt.datetime | None = None


def figure_clock(name: str, fingerprint: Mapping[str, object]) -> str:
    """The clock figure `name` of a device with `fingerprint` is on: its catalogue clock, except that on an icount
    guest a device-clock figure (and a bench-clock one replayed on the guest's clock) is on the guest's clock."""
    try:
        clock = metric(name).clock
    except KeyError:
        return NONE
    icount = fingerprint.get("clock") == "icount"
    if icount and (clock == DEVICE or (clock == BENCH and fingerprint.get("latency_clock") == "device")):
        return GUEST
    return clock or NONE


def run_figures(store: ResultStore, run_id: int, *, run_kind: str | None = None, build: str = "") -> list[Figure]:
    """Every stored figure of run `run_id` that has a value."""
    row = store.runs.run(run_id)
    kinds = {d.name: d.kind for d in store.runs.devices(run_id)}
    prints = store.verdicts.fingerprints(run_id)
    return [
        Figure(
            m.device,
            kinds.get(m.device, ""),
            row.session or "",
            m.name,
            figure_clock(m.name, prints.get(m.device, {})),
            m.unit,
            float(m.value),
            run_kind or row.kind,
            build,
        )
        for m in store.measures.measurements(run_id)
        if m.value is not None
    ]


def judged_runs(runs: Iterable[tuple[str, int, Iterable[Verdict]]], thresholds: Thresholds) -> list[Judged]:
    """(session, run id, its verdicts) as Judged, each with the measurement its rule judges."""
    measurement_of = {r.name: r.measurement for r in thresholds.rules}
    return [
        Judged(session, run_id, v, measurement_of.get(v.metric, v.metric))
        for session, run_id, verdicts in runs
        for v in verdicts
    ]


def verdict_cases(job: str, judged: Iterable[Judged]) -> list[Case]:
    """One case per device, session and judged metric: failed on a regression, skipped (with the reason) when
    inconclusive or not judged, passed otherwise."""
    return [
        Case(
            f"hilbench {job}: {j.session}",
            f"{j.session}.{j.verdict.device}",
            j.verdict.metric,
            CASE_OF.get(j.verdict.status, FAILED),
            f"{j.verdict.title}: {j.verdict.reason}",
        )
        for j in judged
    ]


def outcome_cases(job: str, outcomes: Mapping[str, Outcome]) -> list[Case]:
    """A case per device whose run failed on the product's side (failed) or the bench's (error), beyond what its
    verdicts say: a device that crashed or could not be reached has no judged metric to fail."""
    cases = []
    for device, outcome in sorted(outcomes.items()):
        status = {FailureClass.PRODUCT: FAILED, FailureClass.INFRASTRUCTURE: ERROR}.get(outcome.cls)
        if status is not None:
            cases.append(Case(f"hilbench {job}: devices", f"devices.{device}", "run", status, outcome.label))
    return cases


def alert_cases(job: str, alerts: Iterable[AlertLine]) -> list[Case]:
    """One case per alert (one cause on one device, however many metrics it lists): failed when it makes the job
    exit 1 (untriaged, or acknowledged when those fail the night), passed otherwise with its state and metrics."""
    cases = []
    for a in alerts:
        words = f"{a.state}: {a.metric}" + (f" ({a.text})" if a.text else "")
        status = FAILED if a.failing else PASSED
        cases.append(Case(f"hilbench {job}: alerts", f"alerts.{a.device}", f"alert #{a.id}", status, words))
    return cases


def median_figures(figures: Iterable[Figure]) -> list[Figure]:
    """The figures of several runs of one build as one per label set, each the median of its runs' values."""
    groups: dict[tuple[str, ...], list[Figure]] = {}
    for f in figures:
        key = (f.device, f.kind, f.session, f.metric, f.clock, f.unit, f.run_kind, f.build)
        groups.setdefault(key, []).append(f)
    return [replace(fs[0], value=statistics.median(f.value for f in fs)) for fs in groups.values()]

"""Bisection to the first bad build: over an ordered series of builds (models or firmware images), each step
deployed to one device and replayed `runs` times, judged against the good end's runs with the nightly's rules
(bench.results.judge: Student's t against the runs, the metric's effect floor, the bench-host and icount rules).

A step is bad when a majority of its runs show a suspected regression of the metric (or, without one named,
of any judged metric); good when they do not; skipped (and said so) when its build could not be built,
converted or flashed, when the device did not run it (a model it refused at load, e.g. out of memory, leaves the
one before running: its figures are not the build's), or when its runs were inconclusive (bench host busy).
The search is git bisect's: the good end and the bad end are assumed, each step halves the range of untested
builds between them.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.core.errors import BenchError
from bench.results.judge import judge_run
from bench.results.majority import majority
from bench.results.thresholds import Thresholds
from bench.results.verdict import INCONCLUSIVE, SUSPECTED
from bench.store.results import ResultStore

GOOD, BAD, SKIPPED = "good", "bad", "skipped"
DEFAULT_RUNS = 3


@dataclass
class Step:
    """One build deployed and replayed (or skipped, with the reason)."""

    index: int
    build: str
    status: str  # good, bad, skipped; "baseline" for the good end
    runs: list[int] = field(default_factory=list)
    metric: str = ""  # the metric the verdict rests on
    reason: str = ""
    figures: dict[str, tuple[float, str]] = field(default_factory=dict)  # metric -> (median over the runs, unit)

    def figure(self, metric: str) -> tuple[float, str] | None:
        """The step's median figure of `metric` and its unit (None: not measured)."""
        return self.figures.get(metric)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"index": self.index, "build": self.build, "status": self.status, "runs": self.runs,
                "metric": self.metric, "reason": self.reason,
                "figures": {m: {"value": v, "unit": u} for m, (v, u) in self.figures.items()}}  # fmt: skip


@dataclass
class Bisection:
    """The outcome: the first bad build and the good one before it, with every step taken."""

    device: str
    builds: list[str]
    good: int
    bad: int
    runs_per_step: int
    baseline: Step | None = None
    steps: list[Step] = field(default_factory=list)
    first_bad: int | None = None
    last_good: int | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        name = lambda i: self.builds[i] if i is not None else None  # noqa: E731
        return {
            "device": self.device, "builds": self.builds, "good": name(self.good), "bad": name(self.bad),
            "runs_per_step": self.runs_per_step, "baseline": self.baseline.to_json() if self.baseline else None,
            "steps": [s.to_json() for s in self.steps], "first_bad": name(self.first_bad),
            "last_good": name(self.last_good), "note": self.note,
        }  # fmt: skip


# deploy(index) -> None, or raises BenchError/ConfigError (the step is skipped with the message)
Deploy = Callable[[int], Awaitable[None]]
# replay(index, kind) -> the stored run's id, or raises NotRun (the step is skipped with the message)
Replay = Callable[[int, str], Awaitable[int]]
# progress(message) while it runs
Progress = Callable[[str], None]


def next_index(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untested build nearest the middle of (lo, hi), or None when only skipped ones are left."""
    middle = (lo + hi) // 2
    candidates = sorted((i for i in range(lo + 1, hi) if i not in skipped), key=lambda i: (abs(i - middle), i))
    return candidates[0] if candidates else None


def judge_step(
    store: ResultStore, runs: list[int], device: str, thresholds: Thresholds, metric: str | None
) -> tuple[str, str, str, dict[str, tuple[float, str]]]:
    """good/bad/skipped for a step's runs against the accepted good-end runs, the metric it rests on, why, and the
    median figure of every judged metric."""
    combined = {v.metric: v for v in majority(judge_run(store, run, thresholds, devices=[device]) for run in runs)}
    figures = {m: (v.run_value, v.unit) for m, v in combined.items() if v.run_value is not None}
    if metric is not None:
        if metric not in combined:
            known = ", ".join(sorted(combined)) or "none"
            return SKIPPED, metric, f"no {metric} verdict (judged metrics: {known})", figures
        combined = {metric: combined[metric]}
    suspects = [v for v in combined.values() if v.status == SUSPECTED]
    if suspects:
        worst = max(suspects, key=lambda v: v.effect_pct or 0.0)
        return BAD, worst.metric, f"{worst.metric}: {worst.reason}", figures
    busy = [v for v in combined.values() if v.status == INCONCLUSIVE]
    if busy:
        return SKIPPED, busy[0].metric, f"inconclusive: {busy[0].reason}", figures
    return GOOD, metric or "", "no judged metric worse in a majority of the runs", figures


async def bisect(
    store: ResultStore,
    device: str,
    builds: list[str],
    deploy: Deploy,
    replay: Replay,
    thresholds: Thresholds,
    *,
    good: int = 0,
    bad: int | None = None,
    runs: int = DEFAULT_RUNS,
    metric: str | None = None,
    progress: Progress | None = None,
) -> Bisection:
    """Replay the good end `runs` times as the baseline, then bisect between `good` and `bad` (default: the
    last build). `store` must be the bisection's own results store (its accepted runs are the good end's)."""
    show = progress or (lambda message: None)
    bad = len(builds) - 1 if bad is None else bad
    result = Bisection(device, builds, good, bad, runs)
    if not 0 <= good < bad < len(builds):
        raise ValueError(f"good build #{good} must come before bad build #{bad} among {len(builds)}")
    judged = replace(thresholds, baseline_runs=runs)

    async def measure(index: int, kind: str) -> list[int] | str:
        show(f"{builds[index]}: deploying")
        try:
            await deploy(index)
        except Exception as exc:  # a build that does not convert or flash is skipped, not the bisection's end
            return f"not deployed: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}"
        done = []
        try:
            for n in range(runs):
                show(f"{builds[index]}: replay {n + 1} of {runs}")
                done.append(await replay(index, kind))
        except NotRun as exc:
            return f"not run: {exc}"
        return done

    base = await measure(good, "bisect-good")
    if isinstance(base, str):
        raise BisectError(f"good end {builds[good]}: {base}")
    for run in base:
        store.windows.accept(run, device, True)
    _, _, _, figures = judge_step(store, base, device, judged, metric)
    result.baseline = Step(good, builds[good], "baseline", base, metric or "", "the good end: every step's baseline",
                           figures)  # fmt: skip

    async def step(index: int) -> Step:
        runs_of = await measure(index, "bisect")
        if isinstance(runs_of, str):
            done = Step(index, builds[index], SKIPPED, [], metric or "", runs_of)
        else:
            status, name, why, figures = judge_step(store, runs_of, device, judged, metric)
            done = Step(index, builds[index], status, runs_of, name, why, figures)
        result.steps.append(done)
        show(f"{builds[index]}: {done.status} ({done.reason})")
        return done

    lo, hi, skipped = good, bad, set()
    while (index := next_index(lo, hi, skipped)) is not None:
        done = await step(index)
        if done.status == SKIPPED:
            skipped.add(index)
        elif done.status == BAD:
            hi = index
        else:
            lo = index
    if hi == bad:  # the bad end was only assumed: its figure, and whether it is bad at all
        done = await step(bad)
        if done.status != BAD:
            result.note = f"the bad end {builds[bad]} did not show a regression against {builds[good]}: {done.reason}"
    result.first_bad, result.last_good = hi, lo
    between = sorted(i for i in skipped if lo < i < hi)
    if between:
        names = ", ".join(builds[i] for i in between)
        result.note = f"the first bad build is one of {names}, {builds[hi]} (skipped builds in between)"
    return result


class BisectError(BenchError):
    """The bisection cannot start (its good end did not deploy)."""


class NotRun(BenchError):
    """A step's replay did not run its build (the device ran another model)."""


def offer(device: str, session_file: str, metric: str, revs: tuple[str | None, str | None]) -> str:
    """The `hilbench bisect` command a report of a confirmed regression offers to copy: over the git range between
    the baseline's and the run's bench revisions when both are known and differ, else over a folder of builds."""
    base = ["hilbench", "bisect", "--device", device, "--session", session_file, "--metric", metric]
    good, bad = revs
    if good and bad and good != bad:
        return shlex.join([*base, "--git", f"{good}..{bad}", "--build", "BUILD-CMD"])
    return shlex.join([*base, "--series", "BUILDS-DIR"])

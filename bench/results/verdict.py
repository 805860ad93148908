"""Regression verdicts with runs as the unit of evidence: one run's stored measurement against the same
measurement in a window of earlier accepted runs (same session, same device).

The test is Student's t-test of the run (a sample of one) against the window's runs, one-sided, via
scipy: the same test Apache Otava's TTestSignificanceTester and Perfherder apply to windows of runs,
here with the run under judgement as the "after" window so a change is seen the night it appears.
A regression also needs the effect-size floor of the rule; a window of one run (a pre-merge check cut short) has
no run-to-run spread, and its verdicts are inconclusive. Every verdict carries its evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from bench.core.units import figure
from bench.results.thresholds import MetricRule

REGRESSION = "regression"
IMPROVED = "improved"
UNCHANGED = "unchanged"
NOT_ENOUGH = "not enough samples"
NO_DATA = "no data"
COLLECTING = "collecting baseline"
NOT_APPLICABLE = "not applicable"
INCONCLUSIVE = "inconclusive"
NOT_REPRODUCED = "not reproduced"
SUSPECTED = "suspected"  # a regression before confirmation (never left in a published verdict)
MIN_WINDOW_RUNS = 2  # runs are the unit of replication: a window of one has no run-to-run spread


@dataclass(frozen=True)
class Verdict:
    """The outcome of judging one metric of one device against the baseline runs, with its evidence."""

    device: str
    metric: str
    title: str
    unit: str
    status: str
    baseline_value: float | None  # mean of the window's per-run values
    run_value: float | None
    effect_pct: float | None  # relative change, run vs the window's mean, percent
    threshold_pct: float
    worse: str
    p_value: float | None  # one-sided, in the direction of the observed change
    alpha: float
    test: str
    n_baseline: int  # runs in the window
    n_run: int  # observations behind the run's value
    min_samples: int
    spread: float | None  # standard deviation of the window's per-run values
    baseline_runs: tuple[int, ...]
    reason: str
    confirm_value: float | None = None  # the replay's value, when a suspected regression was replayed
    drift_since: int | None = None  # a drift over the series (bench.results.drift): its first night
    drift_nights: int | None = None  # ...and how many nights it spans, tonight's included

    @property
    def is_drift(self) -> bool:
        """Whether this verdict is a drift over the series rather than tonight against the window."""
        return self.drift_since is not None

    def to_dict(self) -> dict:
        """JSON-ready form (NaN becomes None)."""
        return {k: _clean(v) for k, v in asdict(self).items()}


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return [_clean(v) for v in value]
    return value


@dataclass(frozen=True)
class Window:
    """The baseline of one device and metric: per-run values of the accepted runs, oldest first."""

    run_ids: tuple[int, ...]
    values: tuple[float, ...]
    needed: int  # how many runs make a full window
    pinned: int | None = None  # the run a named baseline pins the window to
    history: tuple[float, ...] = ()  # the same figure over a longer run of accepted runs (the window's included)


def judge(
    rule: MetricRule,
    device: str,
    value: float | None,
    samples: int | None,
    window: Window,
    unit: str = "",
) -> Verdict:
    """One rule applied to one device's run value against its baseline window (before host and confirmation)."""
    base = np.asarray(window.values, dtype=float)
    mean = float(base.mean()) if base.size else None
    spread = float(base.std(ddof=1)) if base.size >= 2 else None
    verdict = dict(
        device=device, metric=rule.name, title=rule.title, unit=unit, threshold_pct=rule.threshold_pct,
        worse=rule.worse, alpha=rule.alpha, test=f"t-test vs {base.size} runs", n_baseline=int(base.size),
        n_run=int(samples or 0), min_samples=rule.min_samples, p_value=None, effect_pct=None,
        baseline_value=mean, run_value=value, spread=spread, baseline_runs=window.run_ids,
    )  # fmt: skip
    if value is None or not math.isfinite(value):
        return Verdict(status=NO_DATA, reason=f"no {rule.measurement} measurement in this run", **verdict)
    if samples is not None and samples < rule.min_samples:
        reason = f"{rule.measurement} rests on {samples} observation(s); needs {rule.min_samples}"
        return Verdict(status=NOT_ENOUGH, reason=reason, **verdict)
    if base.size < window.needed:
        pin = f" up to pinned run {window.pinned}" if window.pinned is not None else ""
        reason = f"collecting baseline ({base.size} of {window.needed}){pin}"
        return Verdict(status=COLLECTING, reason=reason, **verdict)
    if not mean:
        return Verdict(status=UNCHANGED, reason="baseline mean is zero; no relative change", **verdict)
    effect = (value / mean - 1.0) * 100.0
    if base.size < MIN_WINDOW_RUNS:  # a window that cannot say how much runs differ cannot say one stands out
        verdict.update(effect_pct=effect)
        reason = (f"inconclusive: {base.size} baseline run, no run-to-run spread to judge {effect:+.1f}% against "
                  f"(needs {MIN_WINDOW_RUNS} runs; baseline {figure(mean, unit)})")  # fmt: skip
        return Verdict(status=INCONCLUSIVE, reason=reason, **verdict)
    worse_effect = effect if rule.worse == "higher" else -effect
    longer = np.asarray(window.history, dtype=float) if window.history else None
    p = one_sided_p(base, value, towards_higher=effect >= 0, history=longer)
    verdict.update(effect_pct=effect, p_value=p)
    status, reason = _decide(rule, worse_effect, p, mean, spread or 0.0, base.size, unit)
    return Verdict(status=status, reason=reason, **verdict)


def one_sided_p(
    window: np.ndarray, value: float | Sequence[float], *, towards_higher: bool, history: np.ndarray | None = None
) -> float:
    """p-value of `value` being as far from the window's runs as observed, in its direction: Student's t-test
    with the run as a group of one (or the runs `value` lists as a group: a night pooled with its replays; pooled
    variance = the window's), on logarithms when every value is positive
    (timings and sizes vary by a factor from run to run, not by a fixed amount). With a longer `history` of
    accepted runs, the spread is the wider of the window's and the history's, on the history's degrees of freedom:
    five quiet runs in a row must not make an ordinary outlier of a heavy-tailed figure (P99 latency)
    "significant", and five runs' spread alone (4 df: a run must sit 4.1 standard deviations out for p < 0.01)
    must not hide a step of a steady figure that the history's runs measure (19 df: 2.8).
    A window without spread (and no wider history) gives 0 or 1."""
    history = window if history is None or history.size <= window.size else history
    group = np.atleast_1d(np.asarray(value, dtype=float))
    if float(np.std(window)) == 0.0 and float(np.std(history)) == 0.0:
        same = bool(np.all(group == float(window[0])))
        return 1.0 if same else 0.0
    if bool(np.all(group > 0)) and bool(np.all(window > 0)) and bool(np.all(history > 0)):
        window, history, group = np.log(window), np.log(history), np.log(group)
    # scipy.stats.ttest_ind(window, [value]) computes the same for the window's own spread; written out it costs
    # 40x less, which the synthetic-history tests (tens of thousands of verdicts) need
    n = window.size
    spread, df = float(window.std(ddof=1)), n - 1
    if history.size > n:  # the same noise over more runs: the wider of the two spreads, on the history's df
        spread, df = max(spread, float(history.std(ddof=1))), history.size - 1
    t = (float(group.mean()) - float(window.mean())) / (spread * math.sqrt(1.0 / group.size + 1.0 / n))
    return float(t_sf(t, df) if towards_higher else t_sf(-t, df))


def t_sf(t: Any, df: Any) -> Any:
    """Student's t survival function P(T >= t) with `df` degrees of freedom, elementwise: what scipy.stats.t.sf
    computes, without its ~0.1 ms of argument handling a call (the synthetic-history tests make tens of thousands)."""
    from scipy.special import stdtr  # here: scipy is imports that every `hilbench` command would pay

    return stdtr(df, -np.asarray(t, dtype=float))


def _decide(
    rule: MetricRule, worse_effect: float, p: float, mean: float, spread: float, n: int, unit: str
) -> tuple[str, str]:
    big = abs(worse_effect) >= rule.threshold_pct
    significant = p < rule.alpha
    direction = "worse" if worse_effect > 0 else "better"
    base = f"baseline {figure(mean, unit)} ± {figure(spread, unit)} over {n} runs"
    if big and significant:
        status = SUSPECTED if worse_effect > 0 else IMPROVED
        return status, f"{abs(worse_effect):.1f}% {direction} (>= {rule.threshold_pct:g}%), p {p_text(p)}; {base}"
    if big:
        return UNCHANGED, f"{abs(worse_effect):.1f}% {direction}, within the runs' spread (p {p_text(p)}); {base}"
    return UNCHANGED, f"{abs(worse_effect):.1f}% {direction}, below the {rule.threshold_pct:g}% floor; {base}"


def not_applicable(verdict: Verdict, why: str) -> Verdict:
    """A verdict that cannot mean anything on this device (e.g. bench-clock latency of an icount guest). It carries
    no figures: a number next to "not applicable" would read as a measurement."""
    return replace(
        verdict, status=NOT_APPLICABLE, reason=f"not applicable: {why}", baseline_value=None, run_value=None,
        effect_pct=None, p_value=None, spread=None, confirm_value=None,
    )  # fmt: skip


def off_pace(verdict: Verdict, pace: str) -> Verdict:
    """A pacing-dependent verdict of a run whose replay missed the seed's alignment: inconclusive whatever it said
    (the run then joins no baseline). A verdict that could not judge anything anyway is left as it is."""
    if verdict.status in (NOT_APPLICABLE, NO_DATA, NOT_ENOUGH):
        return verdict
    return replace(verdict, status=INCONCLUSIVE, reason=f"inconclusive: replay off pace ({pace}); {verdict.reason}")


def played_otherwise(verdict: Verdict, difference: str) -> Verdict:
    """A counted figure of a run whose device was given its inputs otherwise than in its baseline runs
    (bench.results.played): inconclusive whatever it said, so it is never a regression and the run joins no
    baseline. A verdict that could not judge anything anyway is left as it is."""
    if verdict.status in (NOT_APPLICABLE, NO_DATA, NOT_ENOUGH, COLLECTING):
        return verdict
    why = f"inconclusive: the inputs reached the device differently (host busy): {difference}"
    return replace(verdict, status=INCONCLUSIVE, reason=f"{why}; {verdict.reason}")


def short_stretch(verdict: Verdict, why: str) -> Verdict:
    """A figure taken over a shorter stretch of the session than its baseline runs' (a night that played too few
    decisions for it): inconclusive whatever it said, so it is never a regression nor an improvement, and the run
    joins no baseline (its figure is of another stretch). A verdict that could not judge anything anyway is left as
    it is."""
    if verdict.status in (NOT_APPLICABLE, NO_DATA, NOT_ENOUGH):
        return verdict
    return replace(verdict, status=INCONCLUSIVE, reason=f"inconclusive: {why}; {verdict.reason}")


def host_busy(verdict: Verdict, busy_reason: str) -> Verdict:
    """A suspected regression of a host-timed metric on a virtual device while the bench host was busy."""
    if verdict.status != SUSPECTED:
        return verdict
    return replace(
        verdict, status=INCONCLUSIVE, reason=f"inconclusive: bench host busy ({busy_reason}); {verdict.reason}"
    )


def confirmed(first: Verdict, replay: Verdict | None, control: str = "", pooled: Window | None = None) -> Verdict:
    """The final verdict of a suspected regression after its replay (`replay` judged against the same window).
    A replay that shows it again on its own reproduces it. With `pooled` (the window of a figure counted in
    instructions, whose replays are cheap in noise), so does a replay that is worse than the window by the floor
    when the night and the replay together are a regression against it (pooled_p): a replay alone, on a change a
    few times the figure's spread, is a second coin flip. A replay without the figure (its meter failed) is no
    evidence either way: inconclusive. A counted figure's replay that is under the floor but still beyond the window's
    spread the same way (weakly_worse) is weak evidence: inconclusive, neither a regression nor "not reproduced"."""
    if first.status != SUSPECTED:
        return first
    if replay is None or replay.status == NO_DATA:
        why = replay.reason if replay is not None else "no figure"
        reason = f"inconclusive: the replay gave no value ({why}); {first.reason}"
        return replace(first, status=INCONCLUSIVE, reason=reason)
    figures = f"first {figure(first.run_value, first.unit)}, replay {figure(replay.run_value, first.unit)}"
    extra = f"; control {control}" if control else ""
    if replay.status == SUSPECTED:
        reason = f"{first.reason}; reproduced ({figures}){extra}"
        return replace(first, status=REGRESSION, confirm_value=replay.run_value, reason=reason)
    together = pooled_p(first, replay, pooled) if pooled is not None and replay.status == UNCHANGED else None
    if together is not None:
        effect, p = together
        reason = (f"{first.reason}; reproduced with the night ({figures}; together {effect:.1f}% worse, p "
                  f"{p_text(p)}){extra}")  # fmt: skip
        return replace(first, status=REGRESSION, confirm_value=replay.run_value, reason=reason)
    if replay.status == INCONCLUSIVE:
        reason = f"inconclusive: bench host busy during the replay ({figures}){extra}"
        return replace(first, status=INCONCLUSIVE, confirm_value=replay.run_value, reason=reason)
    if pooled is not None and weakly_worse(replay):
        moved = f"{replay.effect_pct:+.2f}% (p {p_text(replay.p_value or 0.0)})"
        reason = (f"inconclusive: the replay moved the same way, {moved}, under the {first.threshold_pct:g}% floor: "
                  f"weak evidence ({figures}){extra}; {first.reason}")  # fmt: skip
        return replace(first, status=INCONCLUSIVE, confirm_value=replay.run_value, reason=reason)
    reason = f"not reproduced ({figures}; baseline {figure(first.baseline_value, first.unit)}){extra}"
    return replace(first, status=NOT_REPRODUCED, confirm_value=replay.run_value, reason=reason)


# a replay under the floor that still stands out from the window's spread at this level (one-sided) is weak evidence
# for a counted figure's suspected regression, not its absence: a change at its floor (pi5-1's energy per decision
# with twice the MACs, +0.5% against a CV of 0.15-0.23%) lands on either side of it run by run
WEAK_ALPHA = 0.05


def weakly_worse(replay: Verdict) -> bool:
    """Whether an UNCHANGED replay of a suspected regression still went the worse way beyond the window's spread
    at WEAK_ALPHA (its effect under the floor)."""
    if replay.effect_pct is None or replay.p_value is None:
        return False
    worse = replay.effect_pct if replay.worse == "higher" else -replay.effect_pct
    return worse > 0 and replay.p_value < WEAK_ALPHA


def pooled_p(first: Verdict, replay: Verdict, window: Window) -> tuple[float, float] | None:
    """(worse effect %, p) of the night and its replay as one group against `window`, when that is a regression
    (p under alpha, the group's effect over the floor) and the replay alone is worse than the window by the floor;
    else None. Under no change the group is a regression at most alpha of the time, selected night or not."""
    if first.run_value is None or replay.run_value is None or replay.effect_pct is None or not window.values:
        return None
    sign = 1.0 if first.worse == "higher" else -1.0
    if sign * replay.effect_pct < first.threshold_pct:
        return None
    base = np.asarray(window.values, dtype=float)
    group = [first.run_value, replay.run_value]
    effect = sign * (float(np.mean(group)) / float(base.mean()) - 1.0) * 100.0
    longer = np.asarray(window.history, dtype=float) if window.history else None
    p = one_sided_p(base, group, towards_higher=sign > 0, history=longer)
    return (effect, p) if effect >= first.threshold_pct and p < first.alpha else None


def settle(verdict: Verdict) -> Verdict:
    """A suspected regression that could not be replayed stays a regression (real devices, no replay asked)."""
    return replace(verdict, status=REGRESSION) if verdict.status == SUSPECTED else verdict


def p_text(p: float) -> str:
    """A p-value after "p": '= 0.0012' or '< 0.0001'."""
    return "< 0.0001" if p < 1e-4 else f"= {p:.2g}"


def collecting_summary(verdicts: Iterable[Verdict]) -> str:
    """The verdicts still collecting their baseline, in one short line: "collecting baseline (1 of 5)", or with
    the devices that have fewer runs named, "collecting baseline (1 of 5; web-1 0 of 5)". A device counts with
    its least-filled metric. "" when nothing is collecting."""
    least: dict[str, tuple[int, str]] = {}
    for v in verdicts:
        found = _COUNT.search(v.reason) if v.status == COLLECTING else None
        if found and (v.device not in least or int(found[2]) < least[v.device][0]):
            least[v.device] = (int(found[2]), found[1] + found[3])
    if not least:
        return ""
    groups: dict[str, list[str]] = {}
    for device, (_, text) in sorted(least.items()):
        groups.setdefault(text, []).append(device)
    common = max(groups, key=lambda text: len(groups[text]))
    others = [f"{', '.join(devices)} {text}" for text, devices in groups.items() if text != common]
    return f"{COLLECTING} ({'; '.join([common, *others])})"


_COUNT = re.compile(r"\(((\d+) of \d+)\)(.*)$")  # "(2 of 5)" and what follows (" up to pinned run 3")

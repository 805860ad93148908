"""Drift: a sustained shift over the stored series of one device, session and metric that no single night shows.

The night-vs-window test (bench.results.verdict) cannot see a creep: a night that passes joins the window, so the
window creeps along (../shared/docs/verdict-history-facts.md). This test looks at the whole series instead. For
every candidate first night s of a drift (at least MIN_NIGHTS before tonight, at most MAX_NIGHTS), the nights from
s on are tested against a fixed reference, the up to REFERENCE_NIGHTS nights before s: Student's t of the mean of
the drift's nights against the reference's mean, with the reference's spread (on logarithms, one-sided in the
rule's worse direction). The smallest p over the candidates, times their number (Bonferroni), must be below the
rule's alpha, and each of the last RECENT nights must be worse than the reference's mean by the rule's floor (so
one outlier night is not a drift, and a creep is reported once its cumulative change is well past the floor).
The first night named is the candidate with the smallest p (the best split of the series into a before and an
after, as a CUSUM scan or E-divisive's split places it): docs/report.md says why this and not E-divisive.

A night the window test flags cannot be a drift of that kind (its nights never join the window), but it can be a
creep: a regression whose nights keep growing (find_creep). Its nights are the regression's, in a row since its
first; once there are MIN_NIGHTS of them, the least-squares slope of their logarithms is tested against the
window's spread (one-sided t, the window's degrees of freedom), and the growth it fits from the first night to
tonight must pass the rule's floor. A step that stays flat has no slope, so it stays one regression.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bench.core.units import figure
from bench.results.thresholds import MetricRule
from bench.results.verdict import SUSPECTED, Verdict, Window, p_text, t_sf

MIN_NIGHTS = 3  # a drift is sustained over at least this many nights (one night is the night test's job)
MAX_NIGHTS = 30  # how far back a drift's first night may lie (the trend plots' reach)
REFERENCE_NIGHTS = 20  # nights before a drift's first night that form its reference
RECENT = 2  # each of this many newest nights must be past the rule's floor against the reference
SERIES_NIGHTS = MAX_NIGHTS + REFERENCE_NIGHTS  # the stored nights a drift is looked for in


@dataclass(frozen=True)
class Drift:
    """A detected drift: where it starts, how large it is now, and its evidence."""

    since_run: int  # the drift's first night
    nights: int  # nights from the first to tonight, both included
    effect_pct: float  # tonight against the reference's mean, percent (signed): the cumulative change
    p_value: float  # one-sided, Bonferroni-corrected over the candidate first nights
    reference_value: float  # the reference nights' mean
    reference_spread: float  # their standard deviation
    reference_runs: tuple[int, ...]
    candidates: int  # first nights tested
    growth_pct: float | None = None  # a creep's fitted growth a night, percent (signed); None for a split drift


def find_drift(rule: MetricRule, run_ids: list[int], values: list[float], min_reference: int) -> Drift | None:
    """The drift of the series `values` (oldest first, tonight's last; `run_ids` alongside), or None. The reference
    before a candidate first night needs at least `min_reference` nights (the baseline window's size)."""
    x = np.asarray(values, dtype=float)
    if x.size < min_reference + MIN_NIGHTS or not np.all(np.isfinite(x)):
        return None
    logs = np.log(x) if bool(np.all(x > 0)) else x
    logs = logs - logs.mean()  # sums of squares below stay exact to far below any run-to-run spread
    sign = 1.0 if rule.worse == "higher" else -1.0
    # every candidate first night s at once, from cumulative sums: reference logs[lo:s], drift logs[s:]
    s = np.arange(max(min_reference, x.size - MAX_NIGHTS), x.size - MIN_NIGHTS + 1)
    lo = np.maximum(0, s - REFERENCE_NIGHTS)
    c1, c2 = np.concatenate([[0.0], np.cumsum(logs)]), np.concatenate([[0.0], np.cumsum(logs**2)])
    n_ref, n_after = s - lo, x.size - s
    ref_mean = (c1[s] - c1[lo]) / n_ref
    ref_var = np.maximum((c2[s] - c2[lo]) / n_ref - ref_mean**2, 0.0) * n_ref / (n_ref - 1)
    after_mean = (c1[x.size] - c1[s]) / n_after
    spread = np.sqrt(ref_var)
    ok = spread > 1e-12  # a reference without spread: the floor alone is the night test's rule
    if not ok.any():
        return None
    t = np.where(ok, sign * (after_mean - ref_mean) / np.where(ok, spread, 1.0) / np.sqrt(1 / n_after + 1 / n_ref), 0)
    p_all = np.where(ok, t_sf(t, n_ref - 1), 1.0)
    best = int(np.argmin(p_all))
    p, first = min(1.0, float(p_all[best]) * s.size), int(s[best])
    reference = x[lo[best] : first]
    mean = float(reference.mean())
    if p >= rule.alpha or not mean:
        return None
    newest = (x[-RECENT:] / mean - 1.0) * 100.0 * sign
    if float(newest.min()) < rule.threshold_pct:  # each of the newest nights past the floor: one outlier is no drift
        return None
    return Drift(
        since_run=run_ids[first], nights=x.size - first, effect_pct=(float(x[-1]) / mean - 1.0) * 100.0, p_value=p,
        reference_value=mean, reference_spread=float(reference.std(ddof=1)),
        reference_runs=tuple(run_ids[lo[best] : first]), candidates=int(s.size),
    )  # fmt: skip


def find_creep(rule: MetricRule, run_ids: list[int], values: list[float], window: Window) -> Drift | None:
    """The creep of a regression, or None: `values` are its nights in a row (oldest first, tonight's last;
    `run_ids` alongside), `window` the baseline they were judged against. A creep needs MIN_NIGHTS nights whose
    slope (on logarithms) is worse than flat at the rule's alpha, against the spread of the window (its longer
    history when that spreads wider), and a fitted growth from its first night to tonight past the rule's floor."""
    x, ref = np.asarray(values, dtype=float), np.asarray(window.values, dtype=float)
    history = np.asarray(window.history or window.values, dtype=float)
    if x.size < MIN_NIGHTS or ref.size < 2 or not (np.all(x > 0) and np.all(ref > 0) and np.all(history > 0)):
        return None
    sign = 1.0 if rule.worse == "higher" else -1.0
    nights = np.arange(x.size, dtype=float)
    slope = float(np.polyfit(nights, np.log(x), 1)[0])
    spread, df = max(
        (float(np.log(ref).std(ddof=1)), ref.size - 1), (float(np.log(history).std(ddof=1)), history.size - 1)
    )
    sxx = float(((nights - nights.mean()) ** 2).sum())
    flat = 0.0 if sign * slope > 0 else 1.0  # a reference without spread: any slope the right way is one
    p = float(t_sf(sign * slope / (spread / np.sqrt(sxx)), df)) if spread > 1e-12 else flat
    growth = (float(np.exp(slope * (x.size - 1))) - 1.0) * 100.0
    mean = float(ref.mean())
    if p >= rule.alpha or sign * growth < rule.threshold_pct:
        return None
    return Drift(
        since_run=run_ids[0], nights=int(x.size), effect_pct=(float(x[-1]) / mean - 1.0) * 100.0, p_value=p,
        reference_value=mean, reference_spread=float(ref.std(ddof=1)) if ref.size >= 2 else 0.0,
        reference_runs=window.run_ids, candidates=1, growth_pct=(float(np.exp(slope)) - 1.0) * 100.0,
    )  # fmt: skip


def as_drift(verdict: Verdict, drift: Drift) -> Verdict:
    """A night now a suspected regression because the series drifted (confirmed by the nightly's replay like any
    suspect): "drift: inference P50 +31% since run 12 (7 nights), p = 0.0003" for a night the window test passed,
    "drift: inference P50 +16% since run 12 (3 nights), growing +5.1% a night, p < 0.0001" for a creep."""
    what = f"{verdict.title} {drift.effect_pct:+.0f}% since run {drift.since_run} ({drift.nights} nights)"
    if drift.growth_pct is not None:
        what += f", growing {drift.growth_pct:+.1f}% a night"
        test = f"drift: trend t-test over {drift.nights} nights"
        reference = (
            f"baseline {figure(drift.reference_value, verdict.unit)} ± {figure(drift.reference_spread, verdict.unit)}"
            f" over the {len(drift.reference_runs)} runs the regression was judged against"
        )
    else:
        test = f"drift: split t-test over {drift.nights} nights"
        reference = (
            f"reference {figure(drift.reference_value, verdict.unit)} ± {figure(drift.reference_spread, verdict.unit)}"
            f" over the {len(drift.reference_runs)} nights before it; tested {drift.candidates} first nights"
        )
    return replace(
        verdict, status=SUSPECTED, baseline_value=drift.reference_value, effect_pct=drift.effect_pct,
        p_value=drift.p_value, spread=drift.reference_spread, baseline_runs=drift.reference_runs,
        n_baseline=len(drift.reference_runs), test=test,
        reason=f"drift: {what}, p {p_text(drift.p_value)}; {reference}",
        drift_since=drift.since_run, drift_nights=drift.nights,
    )  # fmt: skip

"""Regression verdicts: a run's distributions compared with its baseline's, per device and metric.

A metric is a regression only when both sides have enough samples, the statistic moved in the worse
direction by at least the rule's minimum effect, and a one-sided test finds the change significant:
Mann-Whitney U for locations, a permutation test of the statistic itself for tails and spread (with a
bootstrap interval). Every verdict carries its evidence: p-value, effect, sample counts, threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import numpy as np

from bench.results.mannwhitney import mann_whitney_p
from bench.results.runview import DeviceRun, RunView, Samples
from bench.results.statistics import STATISTICS, Statistic
from bench.results.thresholds import MetricRule, Thresholds

REGRESSION = "regression"
IMPROVED = "improved"
UNCHANGED = "unchanged"
NOT_ENOUGH = "not enough samples"
NO_DATA = "no data"

RESAMPLE_CAP = 5_000  # permutation tests and generic bootstraps use a random subsample of at most this many values
_CHUNK = 50
SEQUENTIAL_HITS = 20  # stop permuting once this many relabellings were at least as extreme as the data


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing one metric of one device with the baseline, with its evidence."""

    device: str
    metric: str
    title: str
    unit: str
    status: str  # REGRESSION, IMPROVED, UNCHANGED, NOT_ENOUGH or NO_DATA
    baseline_value: float | None
    run_value: float | None
    effect_pct: float | None  # relative change of the statistic, run vs baseline, percent
    threshold_pct: float
    worse: str
    p_value: float | None  # one-sided, in the direction of the observed change
    alpha: float
    test: str
    n_baseline: int
    n_run: int
    min_samples: int
    ci_pct: tuple[float, float] | None  # bootstrap interval of effect_pct at 1 - alpha
    reason: str

    def to_dict(self) -> dict:
        """JSON-ready form (NaN becomes None)."""
        return {k: _clean(v) for k, v in asdict(self).items()}


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple):
        return [_clean(v) for v in value]
    return value


def compare_runs(run: RunView, baseline: RunView, thresholds: Thresholds) -> list[Verdict]:
    """Verdicts for every device of `run` and every rule, against the same-named device of `baseline`."""
    verdicts = []
    for name, device in run.devices.items():
        base = baseline.devices.get(name)
        for rule in thresholds.rules:
            verdicts.append(compare_device(rule, device, base))
    return verdicts


def compare_device(rule: MetricRule, device: DeviceRun, baseline: DeviceRun | None) -> Verdict:
    """One rule applied to one device (baseline None: the baseline run did not have this device)."""
    run_samples = device.series(rule.source)
    base_samples = baseline.series(rule.source) if baseline else None
    return compare_samples(rule, device.name, base_samples, run_samples, baseline_missing=baseline is None)


def compare_samples(
    rule: MetricRule,
    device: str,
    baseline: Samples | None,
    run: Samples | None,
    *,
    baseline_missing: bool = False,
    seed: int = 0,
) -> Verdict:
    """Compare the run's samples with the baseline's under `rule`."""
    stat = STATISTICS[rule.statistic]
    unit = stat.unit or (run.unit if run else baseline.unit if baseline else "")
    b = _finite(baseline)
    r = _finite(run)
    verdict = dict(
        device=device, metric=rule.name, title=rule.title, unit=unit, threshold_pct=rule.threshold_pct,
        worse=rule.worse, alpha=rule.alpha, test=rule.test, n_baseline=int(b.size), n_run=int(r.size),
        min_samples=rule.min_samples, p_value=None, effect_pct=None, ci_pct=None,
        baseline_value=float(stat.compute(b)) if b.size else None,
        run_value=float(stat.compute(r)) if r.size else None,
    )  # fmt: skip
    if baseline is None or run is None:
        missing = (
            "the baseline run has no such device"
            if baseline_missing
            else ("no baseline samples" if baseline is None else "no samples in this run")
        )
        return Verdict(status=NO_DATA, reason=f"{missing} of {rule.source}", **verdict)
    if b.size < rule.min_samples or r.size < rule.min_samples:
        return Verdict(
            status=NOT_ENOUGH,
            reason=f"needs {rule.min_samples} samples on each side; baseline has {b.size}, run has {r.size}",
            **verdict,
        )
    base_value, run_value = verdict["baseline_value"], verdict["run_value"]
    if not base_value or not math.isfinite(base_value) or not math.isfinite(run_value):
        reason = "baseline statistic is zero or undefined; no relative change"
        return Verdict(status=UNCHANGED, reason=reason, **verdict)
    effect = (run_value / base_value - 1.0) * 100.0
    worse_sign = 1.0 if rule.worse == "higher" else -1.0
    if rule.test == "mann-whitney":
        p_worse, p_better = _mann_whitney(b, r, stat, rule.worse)
        ci = None
    else:
        p_worse, p_better, ci = _permutation(b, r, stat, rule, seed, worse_sign * effect >= 0)
    worse_effect = worse_sign * effect
    p = p_worse if worse_effect >= 0 else p_better
    verdict.update(effect_pct=effect, p_value=p, ci_pct=ci)
    status, reason = _decide(rule, worse_effect, p)
    return Verdict(status=status, reason=reason, **verdict)


def _decide(rule: MetricRule, worse_effect: float, p: float) -> tuple[str, str]:
    big = abs(worse_effect) >= rule.threshold_pct
    significant = p < rule.alpha
    direction = "worse" if worse_effect > 0 else "better"
    if big and significant:
        status = REGRESSION if worse_effect > 0 else IMPROVED
        limit = f"(>= {rule.threshold_pct:g}%)"
        return status, f"{abs(worse_effect):.1f}% {direction} {limit}, p {_p_text(p)} < {rule.alpha:g}"
    if big:
        return UNCHANGED, f"{abs(worse_effect):.1f}% {direction} but not significant (p {_p_text(p)} >= {rule.alpha:g})"
    return UNCHANGED, f"{abs(worse_effect):.1f}% {direction}, below the {rule.threshold_pct:g}% threshold"


def _p_text(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"= {p:.2g}"


def _finite(samples: Samples | None) -> np.ndarray:
    if samples is None:
        return np.empty(0)
    values = np.asarray(samples.values, dtype=float)
    return values[np.isfinite(values)]


def _mann_whitney(base: np.ndarray, run: np.ndarray, stat: Statistic, worse: str) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values (worse, better) on the raw samples."""
    samples_higher_is_worse = (worse == "higher") != stat.inverts
    greater = mann_whitney_p(run, base, "greater")
    less = mann_whitney_p(run, base, "less")
    return (greater, less) if samples_higher_is_worse else (less, greater)


def _permutation(
    base: np.ndarray, run: np.ndarray, stat: Statistic, rule: MetricRule, seed: int, towards_worse: bool
) -> tuple[float, float, tuple[float, float]]:
    """One-sided permutation-test p-values (worse, better) of the statistic's relative change, and a bootstrap
    interval of that change at 1 - alpha. Large groups are tested on a fixed-seed random subsample.

    Only the p-value in the direction of the observed change (`towards_worse`) is computed; it stops early
    (Besag & Clifford's sequential Monte Carlo p-value, valid as is) once SEQUENTIAL_HITS relabellings were at
    least as extreme, i.e. when p is clearly far above alpha. The other direction's p-value is reported as 1.
    """
    rng = np.random.default_rng(seed)
    n = rule.resamples
    b, r = _capped(base, rng), _capped(run, rng)
    sign = 1.0 if rule.worse == "higher" else -1.0
    observed = sign * (stat.compute(r) / stat.compute(b) - 1.0)
    side = 1.0 if towards_worse else -1.0
    hits = done = 0
    p = None
    for ratios in _permuted_ratios(b, r, stat, n, rng):
        hits += int(np.count_nonzero(side * sign * (ratios - 1.0) >= side * observed))
        done += ratios.size
        if hits >= SEQUENTIAL_HITS:
            p = hits / done
            break
    if p is None:
        p = (hits + 1) / (done + 1)
    change = (_resampled(run, stat, n, rng) / _resampled(base, stat, n, rng) - 1.0) * 100.0
    low, high = np.quantile(change, [rule.alpha / 2, 1 - rule.alpha / 2])
    return (p, 1.0, (float(low), float(high))) if side > 0 else (1.0, p, (float(low), float(high)))


def _permuted_ratios(
    base: np.ndarray, run: np.ndarray, stat: Statistic, n: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """stat(run half) / stat(base half) over `n` random relabellings of the pooled samples, in chunks."""
    if stat.quantile is not None and stat.of_quantile is not None and stat.quantile >= 0.5:
        yield from _permuted_quantile_ratios(base, run, stat, n, rng)
        return
    pooled = np.concatenate([base, run])
    for start in range(0, n, _CHUNK):
        rows = rng.permuted(np.broadcast_to(pooled, (min(_CHUNK, n - start), pooled.size)), axis=1)
        yield _row_statistic(rows[:, base.size :], stat) / _row_statistic(rows[:, : base.size], stat)


def _permuted_quantile_ratios(
    base: np.ndarray, run: np.ndarray, stat: Statistic, n: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """stat(run half) / stat(base half) over `n` random relabellings of the pooled samples, for an upper quantile.

    The nearest-rank q-quantile of a half of size m is its j-th largest value, j = m - ceil(q*m) + 1, so only
    the top of the pooled sample matters: draw how many of the top T pooled values fall in each half
    (hypergeometric), place them at random, and read the j-th largest of each half. Rows whose j-th value lies
    below the top T are redone with a full permutation, so the result is exact.
    """
    pooled = np.sort(np.concatenate([base, run]), kind="stable")[::-1]  # timsort: linear on sorted runs
    sizes = (base.size, run.size)
    ranks = [m - max(1, math.ceil(stat.quantile * m)) + 1 for m in sizes]
    top = min(pooled.size, 4 * sum(ranks) + 64)
    for start in range(0, n, _CHUNK):
        rows = min(_CHUNK, n - start)
        in_base = rng.hypergeometric(sizes[0], sizes[1], top, rows) if top < pooled.size else np.full(rows, sizes[0])
        labels = rng.permuted(np.arange(top)[None, :] < in_base[:, None], axis=1)
        values = []
        for member, rank in ((labels, ranks[0]), (~labels, ranks[1])):
            count = np.cumsum(member, axis=1)
            values.append(np.where(count[:, -1] >= rank, pooled[np.argmax(count >= rank, axis=1)], np.nan))
        out = stat.of_quantile(values[1]) / stat.of_quantile(values[0])
        for row in np.flatnonzero(np.isnan(out)):
            shuffled = rng.permutation(pooled)
            out[row] = float(stat.compute(shuffled[base.size :])) / float(stat.compute(shuffled[: base.size]))
        yield out


def _capped(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(values, RESAMPLE_CAP, replace=False) if values.size > RESAMPLE_CAP else values


def _row_statistic(rows: np.ndarray, stat: Statistic) -> np.ndarray:
    """The statistic of each row of a 2-D array."""
    if stat.quantile is not None and stat.of_quantile is not None:
        k = max(1, math.ceil(stat.quantile * rows.shape[1])) - 1
        return stat.of_quantile(np.partition(rows, k, axis=1)[:, k])
    return np.asarray(stat.compute(rows))


def _resampled(values: np.ndarray, stat: Statistic, n: int, rng: np.random.Generator) -> np.ndarray:
    """The statistic over `n` bootstrap resamples of `values`."""
    if stat.quantile is not None and stat.of_quantile is not None:
        # The m-th order statistic of a resample is sorted[ceil(size * U) - 1] with U ~ Beta(m, size - m + 1):
        # exact, and O(n) instead of O(n * size).
        ordered = np.sort(values, kind="stable")  # histogram samples arrive sorted: timsort is linear on them
        size = ordered.size
        m = max(1, math.ceil(stat.quantile * size))
        index = np.ceil(size * rng.beta(m, size - m + 1, n)).astype(int) - 1
        return stat.of_quantile(ordered[np.clip(index, 0, size - 1)])
    values = _capped(values, rng)
    out = np.empty(n)
    for start in range(0, n, _CHUNK):
        rows = min(_CHUNK, n - start)
        out[start : start + rows] = _row_statistic(values[rng.integers(0, values.size, (rows, values.size))], stat)
    return out

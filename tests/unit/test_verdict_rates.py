"""False-alarm and catch rates of the verdicts over thousands of synthetic histories that vary from run to run
(a file of its own: seconds of CPU each, which the test run spreads over its workers)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.results.verdict import SUSPECTED, judge
from tests.unit.test_verdict import RULES, RUNS, _window


def _history(rng: np.random.Generator, trials: int, cv: float, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`trials` windows of RUNS per-run values and one run each: true value 100, run-to-run noise `cv`
    (log-normal, as timing noise is multiplicative), the run shifted by `shift` (0.15 = +15%)."""
    base = 100.0 * rng.lognormal(0.0, cv, (trials, RUNS))
    run = 100.0 * (1.0 + shift) * rng.lognormal(0.0, cv, trials)
    return base, run


def _rate(rule_name: str, cv: float, shift: float, status: str, trials: int = 4000, seed: int = 1) -> float:
    rule = RULES.rule(rule_name)
    base, run = _history(np.random.default_rng(seed), trials, cv, shift)
    hits = sum(judge(rule, "dev", float(r), None, _window(b)).status == status for b, r in zip(base, run, strict=True))
    return hits / trials


@pytest.mark.parametrize("rule", [r.name for r in RULES.rules])
@pytest.mark.parametrize("cv", [0.02, 0.10, 0.30])
def test_unchanged_runs_raise_at_most_one_percent_false_alarms_per_metric(rule: str, cv: float) -> None:
    # 5 baseline runs, no change: suspected regressions (before any replay) stay at or below alpha = 1%,
    # whatever the run-to-run noise, because the test weighs the run against the runs' own spread
    trials = 4000
    assert _rate(rule, cv, 0.0, SUSPECTED, trials) <= 0.01 + 3 * (0.01 * 0.99 / trials) ** 0.5  # 1% + 3 MC errors


# Run-to-run noise of the per-run figures measured on the virtual fleet (unchanged reduced nightlies of
# tests/bench/bench_verdicts.py on the shared, fully loaded 2-core host; docs/benchmarks.md): c6-a's session-start
# first frame 2.6-3.5%; the median of 10 cold starts 12-15% (each includes a signature check in pure-Python
# MicroPython or a TFLite parse, on CPUs other jobs kept 85-90% busy); the agents' memory high-water mark
# 0.0% (c6-a) and 0.15% (pi5-1).
FIRST_FRAME_CV = 0.026
COLD_START_CV = 0.145
MEMORY_CV = 0.0015


def test_the_products_effect_sizes_are_caught_at_the_measured_noise() -> None:
    # the product's examples: first frame 18.2 -> 21.7 ms (+19%), memory peak 1.42 -> 1.58 GB (+11%)
    assert _rate("first_frame_ms", FIRST_FRAME_CV, 21.7 / 18.2 - 1, SUSPECTED) >= 0.8
    assert _rate("first_frame_ms", FIRST_FRAME_CV, 0.25, SUSPECTED) >= 0.99
    assert _rate("memory_peak", MEMORY_CV, 1.58 / 1.42 - 1, SUSPECTED) >= 0.99
    # an effect at the floor is caught about half the time (the floor is where "worse" starts)
    assert 0.3 <= _rate("first_frame_ms", 0.01, 0.15, SUSPECTED) <= 0.7
    # what the loaded development host gives: cold-start medians that vary by 14.5% from run to run hide +19%
    # (seen in under 10% of nights); a quiet bench host is needed for the +15% first-frame check
    assert _rate("first_frame_ms", COLD_START_CV, 21.7 / 18.2 - 1, SUSPECTED) < 0.1
    # below the floor is never a regression, however clear
    assert _rate("memory_peak", MEMORY_CV, 0.05, SUSPECTED) == 0.0

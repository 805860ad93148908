"""The confirmation replay's rates over synthetic histories: how much rarer false alarms get, and what pooling a
counted night with its replay keeps (a file of its own beside test_verdict_rates.py: seconds of CPU each, which
the test run spreads over its workers)."""

from __future__ import annotations

import numpy as np

from bench.results.verdict import REGRESSION, SUSPECTED, confirmed, judge
from tests.unit.test_verdict import COUNTED, RULES, _window
from tests.unit.test_verdict_rates import _history


def test_confirmation_makes_false_alarms_rarer_still() -> None:
    rule = RULES.rule("latency_p50")
    rng = np.random.default_rng(7)
    base, first = _history(rng, 20000, 0.10)
    replay = 100.0 * rng.lognormal(0.0, 0.10, 20000)
    suspects = alarms = 0
    for b, r1, r2 in zip(base, first, replay, strict=True):
        w = _window(b)
        first_verdict = judge(rule, "dev", float(r1), None, w)
        suspects += first_verdict.status == SUSPECTED
        alarms += confirmed(first_verdict, judge(rule, "dev", float(r2), None, w)).status == REGRESSION
    # the replay is judged against the same window, so the two are not independent (not alpha squared), but a
    # replay still removes most false alarms
    assert alarms / 20000 <= 0.002
    assert alarms <= suspects / 3


def _confirm_rates(cv: float, shift: float, trials: int = 6000, seed: int = 5) -> tuple[float, float, float]:
    """Over `trials` nights shifted by `shift` (and a replay each, same shift) against windows of unchanged runs:
    the share suspected, the share confirmed by the replay alone, and by the replay pooled with the night."""
    rng = np.random.default_rng(seed)
    base, nights = _history(rng, trials, cv, shift)
    replays = 100.0 * (1.0 + shift) * rng.lognormal(0.0, cv, trials)
    suspected = alone = pooled = 0
    for b, night, again in zip(base, nights, replays, strict=True):
        w = _window(b)
        first = judge(COUNTED, "c6-a", float(night), 200, w)
        if first.status != SUSPECTED:
            continue
        suspected += 1
        second = judge(COUNTED, "c6-a", float(again), 200, w)
        alone += confirmed(first, second).status == REGRESSION
        pooled += confirmed(first, second, pooled=w).status == REGRESSION
    return suspected / trials, alone / trials, pooled / trials


def test_pooling_a_counted_nights_replay_confirms_what_the_night_caught() -> None:
    # +1.5% (a model with 3% more MACs on c6-a) at CV 0.3%: the night alone is suspected most nights; a replay
    # judged alone loses a good share of those, the night and its replay pooled keep nearly all of them
    suspected, alone, pooled = _confirm_rates(0.003, 0.015)
    assert suspected >= 0.7
    assert alone <= suspected - 0.05
    assert pooled >= 0.97 * suspected


def test_pooling_a_counted_nights_replay_keeps_false_alarms_under_alpha() -> None:
    # no change: a suspected night's replay pooled with it is a regression well under alpha of the nights
    for cv in (0.0015, 0.003, 0.005):
        suspected, alone, pooled = _confirm_rates(cv, 0.0, trials=20000)
        assert suspected <= 0.012
        assert pooled <= 0.003
        assert alone <= pooled

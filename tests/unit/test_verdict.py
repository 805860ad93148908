"""Verdicts with runs as the unit of evidence, rule by rule on small windows (their rates over synthetic histories:
test_verdict_rates.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.results.thresholds import load_thresholds
from bench.results.verdict import (
    COLLECTING,
    IMPROVED,
    INCONCLUSIVE,
    NO_DATA,
    NOT_ENOUGH,
    NOT_REPRODUCED,
    REGRESSION,
    SUSPECTED,
    UNCHANGED,
    Window,
    confirmed,
    host_busy,
    judge,
)

RULES = load_thresholds()
RUNS = RULES.baseline_runs


def _window(values) -> Window:
    return Window(tuple(range(1, len(values) + 1)), tuple(float(v) for v in values), RUNS)


# a counted figure: c6-a's inference P50 on its instruction-counted core, night to night CV 0.22-0.37%
# (docs/esp32c6.md), judged on its 0.5% floor
COUNTED = replace(RULES.rule("inference_p50"), threshold_pct=RULES.rule("inference_p50").icount_threshold_pct)


def test_a_replay_under_the_floor_is_not_pooled_into_a_regression() -> None:
    w = _window([100.0, 100.5, 99.6, 100.4, 99.5])
    first = judge(COUNTED, "c6-a", 102.5, 200, w)
    assert first.status == SUSPECTED
    final = confirmed(first, judge(COUNTED, "c6-a", 100.4, 200, w), pooled=w)  # +0.4%: under the 0.5% floor
    assert final.status == NOT_REPRODUCED
    replay = judge(COUNTED, "c6-a", 100.7, 200, w)  # +0.7%, within the window's spread on its own
    assert replay.status == UNCHANGED and confirmed(first, replay).status == NOT_REPRODUCED
    again = confirmed(first, replay, pooled=w)
    assert again.status == REGRESSION and "reproduced with the night" in again.reason
    assert "together 1.6% worse" in again.reason


def test_a_counted_replay_under_the_floor_but_beyond_the_spread_is_weak_evidence() -> None:
    # pi5-1's energy per decision (mJ) over its last 5 full unchanged nights, then the 2x-MAC model's night and its
    # replay (benchmarks.md): +0.62% and +0.48% against a spread of 0.18%, the floor 0.5%
    energy = replace(RULES.rule("energy_per_decision"), threshold_pct=0.5)
    nights = (3.0545, 3.0544, 3.0604, 3.0474, 3.0598, 3.0581, 3.0522, 3.0494)  # its 8 full nights
    alone = _window(nights[-5:])
    assert judge(energy, "pi5-1", 3.0724, 240, alone, "mJ").status == UNCHANGED  # 5 runs, 4 df: p = 0.016
    w = replace(alone, history=nights)  # the same spread over 8 runs, 7 df
    first = judge(energy, "pi5-1", 3.0724, 240, w, "mJ")
    assert first.status == SUSPECTED and first.p_value < 0.01, first.reason
    replay = judge(energy, "pi5-1", 3.068, 240, w, "mJ")
    assert replay.status == UNCHANGED and replay.p_value < 0.05  # under the floor, beyond the spread
    final = confirmed(first, replay, pooled=w)
    assert final.status == INCONCLUSIVE and final.confirm_value == 3.068
    assert final.reason.startswith("inconclusive: the replay moved the same way, +0.48%")
    assert "weak evidence" in final.reason
    assert confirmed(first, replay).status == NOT_REPRODUCED  # a timed figure (no pooled window): as before
    back = judge(energy, "pi5-1", 3.0540, 240, w, "mJ")  # the replay back inside the spread: not reproduced
    assert confirmed(first, back, pooled=w).status == NOT_REPRODUCED


def test_a_replay_without_the_figure_is_inconclusive() -> None:
    w = _window([100, 101, 99, 100.5, 99.5])
    first = judge(COUNTED, "c6-a", 120.0, 200, w)
    final = confirmed(first, judge(COUNTED, "c6-a", None, None, w))
    assert final.status == INCONCLUSIVE and final.reason.startswith("inconclusive: the replay gave no value")
    assert confirmed(first, None).status == INCONCLUSIVE


def test_a_regression_names_its_evidence() -> None:
    rule = RULES.rule("first_frame_ms")
    v = judge(rule, "c6-a", 120.0, 10, _window([100, 101, 99, 100.5, 99.5]), "ms")
    assert v.status == SUSPECTED and v.effect_pct == pytest.approx(20.0)
    assert v.n_baseline == 5 and v.baseline_runs == (1, 2, 3, 4, 5)
    assert "20.0% worse" in v.reason and "over 5 runs" in v.reason
    final = confirmed(v, judge(rule, "c6-a", 119.0, 10, _window([100, 101, 99, 100.5, 99.5]), "ms"), "pi5-1 52 then 53")
    assert final.status == REGRESSION and final.confirm_value == 119.0
    assert "reproduced" in final.reason and "control pi5-1" in final.reason


def test_a_suspect_the_replay_does_not_show_is_not_reproduced_with_both_figures() -> None:
    rule = RULES.rule("first_frame_ms")
    w = _window([100, 101, 99, 100.5, 99.5])
    final = confirmed(judge(rule, "c6-a", 120.0, 10, w, "ms"), judge(rule, "c6-a", 100.2, 10, w, "ms"))
    assert final.status == NOT_REPRODUCED
    assert "first 120" in final.reason and "replay 100.2" in final.reason


def test_a_busy_host_makes_a_virtual_devices_suspect_inconclusive() -> None:
    rule = RULES.rule("latency_p50")
    v = judge(rule, "pi5-1", 150.0, 100, _window([100, 101, 99, 100.5, 99.5]), "us")
    busy = host_busy(v, "other processes 80% of 2 CPUs")
    assert busy.status == INCONCLUSIVE and busy.reason.startswith("inconclusive: bench host busy")
    unchanged = judge(rule, "pi5-1", 100.0, 100, _window([100, 101, 99, 100.5, 99.5]), "us")
    assert host_busy(unchanged, "x").status == UNCHANGED


def test_collecting_baseline_until_the_window_is_full() -> None:
    v = judge(RULES.rule("fps"), "pi5-1", 60.0, 1800, _window([60.0, 59.9]))
    assert v.status == COLLECTING and v.reason == f"collecting baseline (2 of {RUNS})"


def test_no_data_not_enough_samples_and_improvement() -> None:
    rule = RULES.rule("latency_p99")
    full = _window([100, 101, 99, 100.5, 99.5])
    assert judge(rule, "c6-a", None, None, full).status == NO_DATA
    assert judge(rule, "c6-a", 150.0, 100, full).status == NOT_ENOUGH  # P99 needs 662 inputs
    assert judge(rule, "c6-a", 50.0, 5000, full).status == IMPROVED
    assert judge(RULES.rule("fps"), "c6-a", 30.0, 5000, _window([60, 60.1, 59.9, 60, 60])).status == SUSPECTED


def test_a_window_without_spread_still_judges_by_the_floor() -> None:
    rule = RULES.rule("memory_peak")
    flat = _window([70_000_000] * 5)
    assert judge(rule, "pi5-1", 70_000_000.0, 1, flat).status == UNCHANGED
    assert judge(rule, "pi5-1", 77_500_000.0, 1, flat).status == SUSPECTED
    assert judge(rule, "pi5-1", 72_000_000.0, 1, flat).status == UNCHANGED  # +2.9%: below the 10% floor


def test_one_baseline_run_has_no_spread_and_judges_nothing() -> None:
    """One run against one run (a check cut short after a pair): never a regression with p < 0.0001."""
    rule = RULES.rule("energy_per_decision")
    one = Window((1,), (3.046,), 1)
    verdict = judge(rule, "switch-1", 3.072, 240, one, "mJ")
    assert verdict.status == INCONCLUSIVE and verdict.p_value is None
    assert "1 baseline run, no run-to-run spread" in verdict.reason and verdict.effect_pct == pytest.approx(0.85, 0.01)
    two = Window((1, 2), (3.046, 3.047), 2)
    assert judge(rule, "switch-1", 3.30, 240, two, "mJ").p_value is not None  # two runs have a spread


def test_first_frame_needs_ten_cold_starts() -> None:
    rule = RULES.rule("first_frame_ms")
    assert rule.measurement == "first_frame_p50" and rule.min_samples == 10
    assert judge(rule, "c6-a", 120.0, 1, _window([100, 101, 99, 100.5, 99.5]), "ms").status == NOT_ENOUGH


def test_a_longer_history_that_spreads_wider_keeps_five_quiet_runs_from_crying_wolf() -> None:
    # P99 latency of a virtual board (ms): five quiet runs, but the last 20 accepted runs varied far more
    rule = RULES.rule("latency_p99")
    quiet = [40.9, 36.1, 36.8, 47.0, 48.8]
    history = (64.6, 100.9, 40.2, 28.4, 229.8, *quiet)
    alone = judge(rule, "pi5-1", 119.7, 9000, _window(quiet))
    assert alone.status == SUSPECTED  # the window alone says "significant"
    wide = Window((6, 7, 8, 9, 10), tuple(quiet), RUNS, history=history)
    assert judge(rule, "pi5-1", 119.7, 9000, wide).status == UNCHANGED
    assert judge(rule, "pi5-1", 900.0, 9000, wide).status == SUSPECTED  # a real jump still stands out


def test_collecting_summary_names_only_the_devices_behind() -> None:
    from bench.results.verdict import COLLECTING, Verdict, collecting_summary

    def v(device: str, reason: str) -> Verdict:
        return Verdict(
            device=device, metric="fps", title="FPS", unit="FPS", status=COLLECTING, baseline_value=None,
            run_value=60.0, effect_pct=None, threshold_pct=5.0, worse="lower", p_value=None, alpha=0.01, test="t",
            n_baseline=0, n_run=100, min_samples=100, spread=None, baseline_runs=(), reason=reason,
        )  # fmt: skip

    same = [v(d, "collecting baseline (1 of 5)") for d in ("c6-a", "c6-b", "orin-1", "pi5-1")]
    assert collecting_summary(same) == "collecting baseline (1 of 5)"
    mixed = [*same, v("web-1", "collecting baseline (0 of 5)"), v("c6-a", "collecting baseline (0 of 5)")]
    assert collecting_summary(mixed) == "collecting baseline (1 of 5; c6-a, web-1 0 of 5)"
    assert collecting_summary([]) == ""


def test_an_energy_verdict_without_a_figure_says_whether_a_meter_is_missing_or_too_slow() -> None:
    from types import SimpleNamespace

    from bench.measure.energy import TOO_SLOW
    from bench.results.judge import no_data_reason

    rule = RULES.rule("energy_per_decision")
    assert "no power meter on this device" in no_data_reason(rule, {})
    slow = {"power_mean": SimpleNamespace(flags=()), rule.measurement: SimpleNamespace(flags=(TOO_SLOW,))}
    assert "cannot resolve single decisions" in no_data_reason(rule, slow)
    assert no_data_reason(rule, {"power_mean": SimpleNamespace(flags=())}) is None  # the generic reason stands
    assert no_data_reason(RULES.rule("latency_p99"), {}) is None  # not a meter's figure


def test_the_report_names_each_inconclusive_devices_own_cause() -> None:
    from types import SimpleNamespace

    from bench.report.build import inconclusive_causes

    off = "inconclusive: replay off pace (send error P99 9.1 ms > the seed's +-8.3 ms alignment); 2% worse"
    busy = "inconclusive: bench host busy (other processes 95% of 2 CPUs); 30% worse"
    verdicts = [SimpleNamespace(device="web-1", status=INCONCLUSIVE, reason=off),
                SimpleNamespace(device="c6-a", status=INCONCLUSIVE, reason=busy),
                SimpleNamespace(device="c6-b", status=UNCHANGED, reason="within the runs' spread")]  # fmt: skip
    causes = inconclusive_causes(verdicts)
    assert causes == [
        {"device": "c6-a", "cause": "bench host busy (other processes 95% of 2 CPUs)"},
        {"device": "web-1", "cause": off.removeprefix("inconclusive: ").split(";")[0]},
    ]

"""The pre-merge check's plan and judgement: ABBA order, candidate replays judged against the same job's baseline
replays by majority, and no check run in a nightly's baseline window or drift series."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from bench.measure.measurement import Measurement
from bench.premerge.interleave import KINDS, SessionCheck, judge_session
from bench.premerge.plan import BASE, CANDIDATE, order, switches
from bench.results.evidence import series, stored_verdicts, window
from bench.results.judge import judge_run
from bench.results.majority import majority
from bench.results.thresholds import load_thresholds
from bench.results.verdict import INCONCLUSIVE, REGRESSION, SUSPECTED, UNCHANGED
from bench.store.results import ResultStore, open_store
from tests.nightly_history import Plan, write_history

RNG = np.random.default_rng(3)


def test_the_builds_alternate_abba_so_a_host_that_changes_weighs_on_both() -> None:
    assert order(3) == [BASE, CANDIDATE, CANDIDATE, BASE, BASE, CANDIDATE]
    assert order(2).count(BASE) == order(2).count(CANDIDATE) == 2
    assert switches(order(3), same_build=False) == 4 and switches(order(3), same_build=True) == 1


def replay(store: ResultStore, kind: str, inference_us: float, session: str = "combat") -> int:
    """A stored replay of c6-a with an inference P50 around `inference_us` (1% noise)."""
    run = store.runs.begin_run(kind, session=session)
    store.runs.add_device(run, "c6-a", "esp32c6")
    value = inference_us * RNG.lognormal(0.0, 0.01)
    store.measures.add_measurements(run, "c6-a", [Measurement("inference_latency_p50", "us", value, samples=900),
                                         Measurement("mem_peak", "B", 118_000.0, samples=40)])  # fmt: skip
    store.runs.update_device(run, "c6-a", status="ok")
    store.runs.finish_run(run, "ok")
    return run


def check_of(store: ResultStore, candidate_us: float, runs: int = 3) -> SessionCheck:
    check = SessionCheck("combat", "combat.mcap")  # type: ignore[arg-type]
    for side in order(runs):
        check.runs[side].append(replay(store, KINDS[side], candidate_us if side == CANDIDATE else 1000.0))
    return check


def test_a_slower_candidate_is_a_regression_and_an_unchanged_one_is_not(tmp_path) -> None:
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        slower = check_of(store, 1500.0)
        verdicts = {v.metric: v for v in judge_session(store, slower, thresholds, ["c6-a"])}
        assert verdicts["inference_p50"].status == REGRESSION
        assert verdicts["inference_p50"].reason.startswith("3 of 3 runs worse (median +")
        assert verdicts["inference_p50"].baseline_runs == tuple(slower.runs[BASE])
        assert verdicts["memory_peak"].status == UNCHANGED
        assert stored_verdicts(store, slower.runs[CANDIDATE][-1])  # kept with the last candidate run
        same = check_of(store, 1000.0)
        assert all(v.status != REGRESSION for v in judge_session(store, same, thresholds, ["c6-a"]))
        for run in slower.runs[BASE] + slower.runs[CANDIDATE]:
            assert store.windows.membership(run) == {}  # no check run joins a baseline


def test_check_runs_never_enter_a_nightly_window_or_drift_series(tmp_path) -> None:
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        nights = write_history(store, thresholds, Plan(6), ("c6-a",))
        check = check_of(store, 5000.0)
        for run in check.runs[BASE] + check.runs[CANDIDATE]:
            store.windows.accept(run, "c6-a", True)  # even a check run marked accepted by mistake stays out
        tonight = replay(store, "replay", 1000.0)
        base = window(store, "combat", "c6-a", "inference_latency_p50", before=tonight, size=5, pinned=None)
        assert set(base.run_ids) <= set(nights) and len(base.run_ids) == 5
        ids, _ = series(store, "combat", "c6-a", "inference_latency_p50", before=tonight, limit=50)
        assert not set(ids) & set(check.runs[BASE] + check.runs[CANDIDATE])
        verdict = next(v for v in judge_run(store, tonight, thresholds) if v.metric == "inference_p50")
        assert verdict.status != SUSPECTED and verdict.baseline_value == pytest.approx(1000.0, rel=0.05)


def test_a_majority_decides(tmp_path) -> None:
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        check = check_of(store, 1000.0)
        base = tuple(check.runs[BASE])
        runs = [judge_run(store, r, thresholds, window_runs=base) for r in check.runs[CANDIDATE]]

    def with_status(statuses: list[str]) -> list:
        first = [next(v for v in r if v.metric == "inference_p50") for r in runs]
        return [[replace(v, status=s)] for v, s in zip(first, statuses, strict=True)]

    assert majority(with_status([SUSPECTED, SUSPECTED, UNCHANGED]))[0].status == SUSPECTED
    one = majority(with_status([SUSPECTED, UNCHANGED, UNCHANGED]))[0]
    assert one.status == UNCHANGED and "1 of 3 runs worse: no majority" in one.reason
    assert majority(with_status([INCONCLUSIVE, INCONCLUSIVE, SUSPECTED]))[0].status == INCONCLUSIVE


STARVED = {"host": "vm", "cpu": "x", "cores": 2, "seconds": 40.0, "load_start": 12.0, "load_end": 12.0,
           "busy_pct": 99.0, "bench_pct": 12.0, "others_pct": 86.0, "steal_pct": 0.0}  # fmt: skip


@pytest.mark.parametrize(("clock", "status"), [("real time", INCONCLUSIVE), ("icount", SUSPECTED)])
def test_a_starved_host_makes_a_suspect_inconclusive_unless_an_icount_guest_counted_it(tmp_path, clock, status):
    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        check = check_of(store, 1500.0)
        for run in check.runs[BASE] + check.runs[CANDIDATE]:
            store.verdicts.record_host(run, STARVED)  # as busy during the baseline: only the starved rule can apply
            store.verdicts.record_fingerprint(run, "c6-a", {"virtual": True, "clock": clock})
        (verdict,) = [v for v in judge_run(store, check.runs[CANDIDATE][0], thresholds, window_runs=tuple(
            check.runs[BASE])) if v.metric == "inference_p50"]  # fmt: skip
    assert verdict.status == status
    if status == INCONCLUSIVE:
        assert "the bench was starved" in verdict.reason


def test_the_exit_code_gates_a_merge(tmp_path) -> None:
    """1 on a regression or a candidate the device crashed on, 3 when only the bench failed, 0 otherwise (an
    inconclusive metric too: the summary says so)."""
    from bench.core.outcomes import infrastructure, product
    from bench.premerge.interleave import CheckResult

    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        slower, same = check_of(store, 1500.0), check_of(store, 1000.0)
        slower.verdicts = judge_session(store, slower, thresholds, ["c6-a"])
        same.verdicts = judge_session(store, same, thresholds, ["c6-a"])
    passed = CheckResult("model m.tflite", 3, [same])
    assert passed.exit_code == 0 and json.dumps(passed.to_json())
    assert CheckResult("model m.tflite", 3, [slower]).exit_code == 1
    broken = CheckResult("model m.tflite", 3, [same], {"c6-a": [infrastructure("no answer on its link")]})
    assert broken.exit_code == 3
    crashed = CheckResult("model m.tflite", 3, [same], {"c6-a": [product("did not run the candidate")]})
    assert crashed.exit_code == 1
    busy = [replace(v, status=INCONCLUSIVE) if v.metric == "inference_p50" else v for v in same.verdicts]
    assert CheckResult("model m.tflite", 3, [replace(same, verdicts=busy)]).exit_code == 0


def test_a_candidate_the_device_did_not_run_is_its_failure_not_a_regression(tmp_path) -> None:
    """The check stops replaying a device once it ran the wrong model (after one pair): it says so, exit 1, and
    judges none of its figures; one baseline run against one candidate run regresses nothing either."""
    from bench.core.outcomes import FailureClass, product
    from bench.premerge.interleave import CheckResult, judge_check

    thresholds = load_thresholds()
    with open_store(tmp_path / "r.sqlite") as store:
        pair = check_of(store, 1500.0, runs=1)  # one baseline replay, one candidate replay 50% slower
        wrong = CheckResult("model m.tflite", 3, [pair], {"c6-a": [product("did not run the candidate: ran x")]})
        judge_check(store, wrong, thresholds, ["c6-a"])
        assert wrong.verdicts == [] and wrong.exit_code == 1
        outcome = wrong.device_outcomes()["c6-a"]
        assert outcome.cls == FailureClass.PRODUCT and "did not run the candidate" in outcome.label
        ran = CheckResult("model m.tflite", 3, [replace(pair, verdicts=[])])
        judge_check(store, ran, thresholds, ["c6-a"])
    slower = next(v for v in ran.verdicts if v.metric == "inference_p50")
    assert slower.status == INCONCLUSIVE and "no run-to-run spread" in slower.reason and ran.exit_code == 0

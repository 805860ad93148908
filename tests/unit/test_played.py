"""What a device on its own clock was given (bench.measure.played), and how the verdict treats a night that gave it
its inputs otherwise than its baseline's nights (bench.results.played, bench.results.judge)."""

from __future__ import annotations

from pathlib import Path

from bench.agent.frame import Frame
from bench.measure.measurement import Measurement
from bench.measure.played import played
from bench.results.judge import judge_run
from bench.results.played import played_difference
from bench.results.thresholds import load_thresholds
from bench.results.verdict import COLLECTING, INCONCLUSIVE, SUSPECTED, UNCHANGED
from bench.store.results import ResultStore, open_store

C6 = "c6-a"
# 10 inputs a frame of 50 ms, seq 0, 1, 2, ...: frame k saw the inputs up to seq 10k + 9
PER_FRAME = 10


def frames(n: int, per_frame: int = PER_FRAME, skip_every: int = 0) -> list[Frame]:
    out = []
    for k in range(n):
        ran = not skip_every or k % skip_every
        t0 = 1_000_000 + 50_000 * k
        out.append(Frame(i=k, vsync=t0 - 50_000, due=t0, ran=bool(ran), t0=t0 if ran else None,
                         t1=t0 + 13_600 if ran else None, seq=per_frame * (k + 1) - 1))  # fmt: skip
    return out


def test_each_inference_counts_the_inputs_it_was_given_since_the_one_before() -> None:
    given = played(frames(4, skip_every=2), range(40), [{"held_late": 0}])
    assert given.per_frame == (20, 20) and given.frames == 2 and given.mean == 20 and given.late == 0
    assert played(frames(3), [5, 2, 0, 1, 3, 4, 6, 7, 8, 9, 10], []).per_frame == (10, 1, 0)  # only what was sent
    assert played([], [1], []).mean is None and played([], [1], []).late is None


def night(store: ResultStore, p50: float, n: int = 200, per_frame: int = PER_FRAME, late: int = 0) -> int:
    """One stored night of c6-a replayed on its counted clock."""
    run = store.runs.begin_run("nightly", bench="t", session="combat")
    store.runs.add_device(run, C6, "esp32c6")
    store.frames.add_frames(run, C6, frames(n, per_frame))
    store.frames.add_inputs(run, C6, [(s, "gaze", None, 1000 * s) for s in range(n * per_frame)])
    given = played(frames(n, per_frame), range(n * per_frame), [{"held_late": late}])
    store.measures.add_measurements(run, C6, [
        Measurement("inference_latency_p50", "us", p50, samples=n),
        Measurement("inferences", "count", float(n)),
        Measurement("played_inputs_per_frame", "count", given.mean, samples=n),
        Measurement("played_late", "count", float(late)),
    ])  # fmt: skip
    store.verdicts.record_fingerprint(run, C6, {"virtual": True, "clock": "icount", "latency_clock": "device"})
    store.runs.finish_run(run, "ok")
    return run


def baseline(store: ResultStore) -> list[int]:
    runs = [night(store, p50) for p50 in (13_583, 13_591, 13_583, 13_591, 13_587)]
    for r in runs:
        store.windows.accept(r, C6, True, "")
    return runs


def inference(store: ResultStore, run: int):
    (v,) = [v for v in judge_run(store, run, load_thresholds()) if v.metric == "inference_p50"]
    return v


def test_a_night_given_its_inputs_as_its_baseline_is_judged_on_its_figure(tmp_path: Path) -> None:
    with open_store(tmp_path / "r.sqlite") as store:
        runs = baseline(store)
        same = night(store, 13_589)
        assert played_difference(store, same, C6, runs) is None
        assert inference(store, same).status == UNCHANGED
        slower = night(store, 13_589 * 1.03)  # a model 3% slower, given the same inputs: a suspected regression
        assert inference(store, slower).status == SUSPECTED


def test_fewer_frames_late_inputs_or_more_inputs_per_inference_make_every_counted_figure_inconclusive(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "r.sqlite") as store:
        runs = baseline(store)
        short = night(store, 13_727, n=154)  # the busy night: +1.0%, fewer frames
        why = played_difference(store, short, C6, runs)
        assert why == "154 frames played, its baseline runs at least 200"
        v = inference(store, short)
        assert v.status == INCONCLUSIVE and v.reason.startswith(
            "inconclusive: the inputs reached the device differently (host busy): 154 frames played"
        )
        late = night(store, 13_727, late=3)
        assert "3 inputs reached it after they were due" in (played_difference(store, late, C6, runs) or "")
        assert inference(store, late).status == INCONCLUSIVE
        crowded = night(store, 13_727, per_frame=11)
        assert "inputs per inference +10.0%" in (played_difference(store, crowded, C6, runs) or "")
        assert inference(store, crowded).status == INCONCLUSIVE


def test_fewer_frames_count_only_against_a_baseline_that_played_a_fixed_span(tmp_path: Path) -> None:
    with open_store(tmp_path / "r.sqlite") as store:
        runs = [night(store, 13_589, n=n) for n in (150, 200, 170, 240, 160)]  # what fitted a budget each night
        assert played_difference(store, night(store, 13_589, n=120), C6, runs) is None


def test_a_night_still_collecting_its_baseline_stays_collecting(tmp_path: Path) -> None:
    with open_store(tmp_path / "r.sqlite") as store:
        first = night(store, 13_583)
        store.windows.accept(first, C6, True, "")
        assert inference(store, night(store, 13_727, n=150)).status == COLLECTING

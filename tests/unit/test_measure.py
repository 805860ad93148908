"""Each metric's definition on hand-made frame sequences whose answers are known."""

from __future__ import annotations

import pytest

from bench.agent.frame import Frame
from bench.measure.device import measure_device
from bench.measure.faults import fault_event
from bench.measure.frames import count_stutters, frame_timing
from bench.measure.histogram import Histogram
from bench.measure.latency import decision_latency, inference_latency
from bench.measure.measurement import Measurement
from bench.measure.records import OffsetClock
from bench.measure.replay_timing import ReplayTiming, release_error
from bench.measure.samples import min_samples


def _frames(times_us: list[int], deviations_us: list[int] | None = None, start: int = 1_000_000) -> list[Frame]:
    """Inference frames whose inference starts are `times_us` apart, each `deviation` after its due time."""
    frames, t = [], start
    devs = deviations_us or [0] * (len(times_us) + 1)
    for i in range(len(times_us) + 1):
        frames.append(Frame(i=i, vsync=t - 1000, due=t - devs[i], ran=True, t0=t, t1=t + 2000, seq=i))
        if i < len(times_us):
            t += times_us[i]
    return frames


def _recorded(hist: Histogram) -> list[int]:
    """Every value in an HDR histogram (at its bucket's value), sorted."""
    return sorted(
        v.value_iterated_to for v in hist.hdr.get_recorded_iterator() for _ in range(v.count_at_value_iterated_to)
    )


def test_steady_frames_give_exact_fps_and_constant_deviation() -> None:
    timing = frame_timing(_frames([20_000] * 99, [100] * 100))
    assert timing.fps == pytest.approx(50.0)
    assert timing.low_1pct_fps == pytest.approx(50.0, rel=1e-3)
    assert timing.jitter_std_us == 0 and timing.jitter_p99_us == pytest.approx(100, abs=0.1)
    assert timing.stutters == 0 and timing.inferences == 100 and timing.frames == 100


def test_alternating_deviation_gives_its_std_and_p99() -> None:
    devs = [200 if i % 2 else -200 for i in range(100)]
    timing = frame_timing(_frames([16_667] * 99, devs))
    assert timing.jitter_std_us == pytest.approx(200)
    assert timing.jitter_p99_us == pytest.approx(200, rel=1e-3)


def test_one_percent_low_is_one_over_p99_frame_time() -> None:
    times = [10_000] * 98 + [20_000] * 2
    timing = frame_timing(_frames(times))
    assert timing.fps == pytest.approx(1e6 / 10_200)
    assert timing.low_1pct_fps == pytest.approx(50.0, rel=1e-3)


def test_stutter_is_a_frame_over_two_and_a_half_moving_averages() -> None:
    # 2.6x the average of the previous 10 -> stutter; then 24 ms against an average of 11 ms (2.18x) -> not
    assert count_stutters([10_000] * 10 + [26_000] + [10_000] * 5 + [24_000]) == 1
    assert count_stutters([10_000] * 3 + [90_000]) == 0  # too little history to judge
    assert count_stutters([10_000] * 40 + [30_000, 30_000]) == 2  # the second still beats 2.5x the average


def test_skipped_late_and_non_inference_frames() -> None:
    frames = [
        Frame(0, 0, due=100, ran=True, t0=100, t1=900, seq=0),
        Frame(1, 16_667, ran=False, skip=True, seq=0),
        Frame(2, 33_333, due=33_433, ran=True, t0=51_000, t1=52_000, seq=1, late=True),
        Frame(3, 50_000, ran=False, skip=True, seq=1),
    ]
    timing = frame_timing(list(reversed(frames)))  # order does not matter
    assert (timing.frames, timing.inferences, timing.skipped, timing.late) == (4, 2, 2, 1)
    assert timing.fps == pytest.approx(1e6 / 50_900)
    hist = inference_latency(frames)
    assert hist.count == 2 and hist.summary().max == 1000 and hist.summary().min == 800


def test_decision_latency_maps_the_device_clock_and_counts_misses() -> None:
    clock = OffsetClock(offset_ns=-5_000_000_000)  # bench = device_us * 1000 + 5 s
    base = 1_000_000_000
    sent = {k: base + k * 10_000_000 for k in range(10)}
    sent[10] = base + 100_000_000  # never decided, run continues 100 ms after: a miss
    sent[11] = base + 190_000_000  # never decided, but the run ended 10 ms after: not judged
    dev = lambda bench_ns: (bench_ns - 5_000_000_000) // 1000  # noqa: E731
    frames = [
        Frame(0, 0, ran=True, t0=dev(base + 30_000_000), t1=dev(base + 35_000_000), seq=3),
        Frame(1, 0, ran=True, t0=dev(base + 140_000_000), t1=dev(base + 150_000_000), seq=9),
        Frame(2, 0, ran=False, skip=True, seq=9),
    ]
    result = decision_latency(frames, sent, clock, budget_ms=50, end_ns=base + 200_000_000)
    values = sorted(v for (v,) in [(x.value_iterated_to,) for x in result.histogram.hdr.get_recorded_iterator()])
    assert values == pytest.approx(
        [5_000, 15_000, 25_000, 35_000, 60_000, 70_000, 80_000, 90_000, 100_000, 110_000], rel=1e-3
    )
    assert (result.decided, result.undecided, result.misses, result.clock_inconsistent) == (10, 2, 7, 0)


def test_percentiles_are_flagged_below_the_loadgen_floors() -> None:
    assert (min_samples(90), min_samples(99)) == (64, 662)
    assert min_samples(50) < min_samples(95) < min_samples(99)
    assert "too_few_samples_for_p90" in Histogram("x", "us").record_all(range(63)).summary().flags
    ok = Histogram("x", "us").record_all(range(64)).summary().flags
    assert "too_few_samples_for_p90" not in ok and "too_few_samples_for_p99" in ok
    assert Histogram("x", "us").record_all(range(662)).summary().flags == ()


def test_histogram_summary_and_encoding_round_trip() -> None:
    hist = Histogram("lat", "us").record_all(range(1, 1001))
    s = hist.summary()
    assert (s.count, s.p50, s.p90, s.p95, s.p99, s.max) == (1000, 500, 900, 950, 990, 1000)
    back = Histogram.decode("lat", "us", hist.encode())
    assert back.summary() == s
    neg = Histogram("x", "us").record_all([-5, 3])
    assert neg.clamped == 1 and neg.summary().min == 0


def test_fault_timings() -> None:
    msg = {"t": "fault", "kind": "rollback", "cause": "oom", "model": {"version": 4}, "prev": {"version": 3},
           "t_switch": 30_000_000, "t_fault": 30_900_000, "rollback_us": 2100, "detail": "MemoryError"}  # fmt: skip
    ev = fault_event(msg, OffsetClock(offset_ns=1_000_000_000))
    assert (ev.kind, ev.cause, ev.model_version, ev.prev_version) == ("rollback", "oom", 4, 3)
    assert ev.since_switch_ms == 900 and ev.rollback_us == 2100
    assert ev.t_fault_bench_ns == 30_900_000_000 - 1_000_000_000


def test_measurement_to_dict_is_json_ready() -> None:
    assert Measurement("x", "ms", 1, flags=("too_few_samples_for_p99",)).to_dict()["flags"] == [
        "too_few_samples_for_p99"
    ]


def test_measure_device_puts_it_together() -> None:
    frames = _frames([20_000] * 69)
    clock = OffsetClock(0)
    sent = {i: f.t0 * 1000 - 1_000_000 for i, f in enumerate(frames)}  # each input 1 ms before its frame
    stats = [{"mem_peak": 1000}, {"mem_peak": 5000}, {"mem": 3}]
    faults = [{"kind": "crash", "cause": "exception", "t_switch": 1, "t_fault": 2}]
    timing = _timing("bench", sent, start_ns=frames[0].t0 * 1000 - 5_000_000, send_errors_ns=[100, 200, 300])
    m = measure_device(frames, clock=clock, budget_ms=50, stats=stats, faults=faults, timing=timing)
    v = m.values()
    assert v["fps"] == pytest.approx(50.0) and v["frames"] == 70 and v["mem_peak"] == 5000
    assert v["decision_latency_p50"] == pytest.approx(3000, rel=1e-3)  # 1 ms before t0, t1 = t0 + 2 ms
    assert v["decision_deadline_misses"] == 0 and v["faults"] == 1 and v["faults_crash"] == 1
    assert v["first_frame"] == pytest.approx(7.0)  # started 5 ms before the first t0, inference takes 2 ms
    assert v["inference_latency_max"] == 2000 and v["replay_send_error_max"] == 300
    assert m.get("decision_latency_p99").flags == ("too_few_samples_for_p99",)
    assert m.get("decision_latency_p90").flags == ()
    assert {h.name for h in m.histograms} >= {"inference_latency", "decision_latency", "frame_time"}
    assert all(x.unit for x in m.measurements)


def _timing(clock: str | None, inputs: dict[int, int], **kw) -> ReplayTiming:
    fields = {"latency_clock": OffsetClock(0), "end_ns": None, "start_ns": None, "send_errors_ns": None,
              "session_s": 1.4, "covered_s": 1.4, "loop_s": 1.4, "vsync_hz": 50, "fps": 50} | kw  # fmt: skip
    return ReplayTiming(clock=clock, inputs_ns=inputs, **fields)


def test_device_clock_latency_runs_from_due_to_decision_on_the_device_clock() -> None:
    """An icount guest's replay: inputs are due on the guest's clock (the agent holds them), so decision latency,
    first frame and the replay's fidelity come from device timestamps only, and they are judged figures."""
    frames = _frames([20_000] * 69)
    due = {i: f.t0 * 1000 - 4_000_000 for i, f in enumerate(frames)}  # due 4 ms before the inference using it
    timing = _timing(
        "device", due, start_ns=frames[0].t0 * 1000 - 9_000_000, covered_s=0.7, loop_s=0.7, budget_hit=True
    )
    m = measure_device(frames, clock=OffsetClock(10**12), budget_ms=50, timing=timing)  # the bench mapping: unused
    v = m.values()
    assert v["decision_latency_p50"] == pytest.approx(6000, rel=1e-3)  # 4 ms waiting, 2 ms inference
    assert v["first_frame"] == pytest.approx(11.0)
    assert "device clock" in m.get("decision_latency_p50").description
    assert v["replay_release_error_max"] == 0 and v["replay_released_early"] == 0
    assert "replay_send_error_p99" not in v  # no bench send times that matter
    assert (
        v["replay_covered"] == 0.7 and v["frames_scheduled"] == 35 and "budget" in m.get("replay_covered").description
    )


def test_figures_without_a_meaningful_clock_are_absent_not_zero() -> None:
    """An icount guest paced on the bench clock: latency and first frame are not stored at all (never 0.0)."""
    frames = _frames([20_000] * 10)
    m = measure_device(frames, clock=OffsetClock(0), budget_ms=50, timing=_timing(None, {}, start_ns=1))
    names = set(m.values())
    assert not {"decision_latency_p50", "decision_deadline_misses", "first_frame"} & names
    assert "inference_latency_p50" in names


def test_release_error_counts_inputs_that_missed_the_inference_they_were_due_for() -> None:
    """Inference starts every 10 ms; seq 0 is there in time, seq 1 arrives one inference late, seq 2 two late."""
    frames = [Frame(i=i, vsync=t, ran=True, t0=t, t1=t + 1, seq=s) for i, (t, s) in
              enumerate([(0, 0), (10_000, 0), (20_000, 1), (30_000, 2), (40_000, 2)])]  # fmt: skip
    due = {0: 0, 1: 5_000_000, 2: 5_000_000}
    err = release_error(frames, due)
    assert sorted(_recorded(err.histogram)) == pytest.approx([0, 10_000_000, 20_000_000], rel=1e-3)
    assert err.early == 0
    assert release_error(frames, {2: 35_000_000}).early == 1  # used at 30 ms, due at 35 ms: released early

"""The replayer against a fake clock: due times, sleep-then-spin, speed factor, as fast as possible."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import numpy as np
import pytest

from bench.config.fleet import SerialLink
from bench.replay.pacing import HELPER_RT_PRIORITY, RT_PRIORITY, Pacer, realtime_priority
from bench.replay.plan import VoiceMode, build_plan, choose_voice_mode, link_bytes_per_s
from bench.replay.player import LEAD_NS, Replayer, Track
from bench.replay.synth import synth_session
from bench.replay.voice_features import voice_features


class FakeClock:
    """Each reading advances `tick_ns` (the cost of reading the clock); each sleep overshoots by `late_ns`."""

    def __init__(self, tick_ns: int = 100, late_ns: int = 600_000) -> None:
        self.t = 10_000_000_000
        self.tick_ns = tick_ns
        self.late_ns = late_ns
        self.slept: list[float] = []

    def now_ns(self) -> int:
        self.t += self.tick_ns
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += round(seconds * 1e9) + self.late_ns
        await asyncio.sleep(0)


class ClockSink:
    def __init__(self, clock: FakeClock, fail_at: int | None = None) -> None:
        self.clock = clock
        self.lines: list[bytes] = []
        self.fail_at = fail_at

    async def send_raw(self, data: bytes) -> int:
        if self.fail_at is not None and len(self.lines) == self.fail_at:
            raise ConnectionResetError("link gone")
        self.lines.append(data)
        return self.clock.now_ns()


def _plan(seconds: float = 2.0):
    return build_plan(synth_session("combat", 3, duration_s=seconds), lambda m: json.dumps(m).encode())


def _play(plan, clock: FakeClock, spin_ns: int, speed: float | None = 1.0, sinks: int = 2):
    pacer = Pacer(clock, spin_ns=spin_ns)
    tracks = [Track(f"s{i}", ClockSink(clock)) for i in range(sinks)]
    outcome = asyncio.run(Replayer(plan, pacer).play(tracks, speed))
    return outcome, tracks


def test_sleep_then_spin_sends_at_the_due_time_never_before() -> None:
    plan = _plan()
    clock = FakeClock(tick_ns=100, late_ns=600_000)
    outcome, tracks = _play(plan, clock, spin_ns=1_000_000)
    assert outcome.done == len(plan.inputs) and all(t.sent == len(plan.inputs) for t in tracks)
    for track in tracks:
        errors = track.send_errors_ns()
        assert min(errors) >= 0
        assert max(errors) <= 1_000  # a few clock readings, not a sleep's lateness
    # the pacer slept through the gaps instead of spinning through them
    assert outcome.sleeps > len(plan.inputs) / 2 and max(clock.slept) > 0.005
    # due times follow the session timestamps exactly
    offsets = [p.offset_ns for p in plan.inputs]
    assert [d - outcome.started_ns for d in tracks[0].due_ns] == offsets
    assert outcome.started_ns - clock.t < LEAD_NS


def test_sleep_alone_is_late_by_the_sleep_overshoot() -> None:
    plan = _plan()
    clock = FakeClock(tick_ns=100, late_ns=600_000)
    _outcome, tracks = _play(plan, clock, spin_ns=0)
    errors = tracks[0].send_errors_ns()
    assert np.median(errors) >= 500_000  # this is what the spin phase removes


def test_speed_factor_scales_the_schedule() -> None:
    plan = _plan()
    outcome, tracks = _play(plan, FakeClock(), spin_ns=1_000_000, speed=2.0)
    assert [d - outcome.started_ns for d in tracks[0].due_ns] == [round(p.offset_ns / 2) for p in plan.inputs]
    assert outcome.finished_ns - outcome.started_ns == pytest.approx(plan.duration_ns / 2, rel=0.01)


def test_as_fast_as_possible_never_sleeps() -> None:
    plan = _plan()
    clock = FakeClock()
    outcome, tracks = _play(plan, clock, spin_ns=1_000_000, speed=None)
    assert clock.slept == [] and outcome.sleeps == 0
    assert tracks[0].sent == len(plan.inputs) and tracks[0].send_errors_ns() == []
    assert outcome.finished_ns - outcome.started_ns < plan.duration_ns / 100


def test_a_failing_sink_is_dropped_and_the_others_go_on() -> None:
    plan = _plan(1.0)
    clock = FakeClock()
    good, bad = ClockSink(clock), ClockSink(clock, fail_at=10)
    tracks = [Track("good", good), Track("bad", bad)]
    asyncio.run(Replayer(plan, Pacer(clock)).play(tracks, 4.0))
    assert len(good.lines) == len(plan.inputs) and len(bad.lines) == 10
    assert tracks[1].failed is not None and "link gone" in tracks[1].failed and tracks[1].sent == 10


def test_plan_sequence_timestamps_and_voice_modes() -> None:
    plan = _plan(1.0)
    msgs = [json.loads(p.lines[VoiceMode.PCM]) for p in plan.inputs]
    assert [m["seq"] for m in msgs] == list(range(len(msgs)))
    assert all(m["ts"] == p.offset_ns // 1_000_000 for m, p in zip(msgs, plan.inputs, strict=True))
    voice = [p for p in plan.inputs if p.channel == "voice"]
    assert json.loads(voice[0].lines[VoiceMode.PCM])["ch"] == "voice"
    feat = json.loads(voice[0].lines[VoiceMode.FEATURES])
    assert feat["ch"] == "voicef" and len(feat["d"]) == 4
    gaze = next(p for p in plan.inputs if p.channel == "gaze")
    assert gaze.lines[VoiceMode.PCM] == gaze.lines[VoiceMode.FEATURES]
    assert sum(len(p.lines[VoiceMode.FEATURES]) for p in voice) < sum(len(p.lines[VoiceMode.PCM]) for p in voice) / 4
    assert plan.bytes_per_s(VoiceMode.FEATURES) < plan.bytes_per_s(VoiceMode.PCM)


def test_slow_serial_links_get_voice_features() -> None:
    plan = _plan(1.0)
    assert choose_voice_mode(plan, link_bytes_per_s(None)).mode is VoiceMode.PCM
    uart = link_bytes_per_s(SerialLink("rfc2217://localhost:1", 115200))
    assert uart == 11520
    choice = choose_voice_mode(plan, uart)
    assert choice.mode is VoiceMode.FEATURES and "voice features" in choice.reason
    fast = link_bytes_per_s(SerialLink("rfc2217://localhost:1", 12_000_000))
    assert choose_voice_mode(plan, fast).mode is VoiceMode.PCM


def test_voice_features_find_pitch_and_silence() -> None:
    t = np.arange(320) / 16000
    for f0 in (100.0, 180.0, 320.0):
        pcm = (4000 * np.sin(2 * np.pi * f0 * t)).astype("<i2").tobytes()
        rms, zcr, pitch, voiced = voice_features(pcm[320:], pcm[:320])
        assert pitch == pytest.approx(f0, rel=0.02) and voiced == 1.0
        assert rms == pytest.approx(4000 / 32768 / np.sqrt(2), rel=0.05) and zcr < 0.05
    assert voice_features(bytes(320), bytes(320)) == [0.0, 0.0, 0.0, 0.0]
    noise = np.random.default_rng(7).normal(0, 3000, 320).astype("<i2").tobytes()
    assert voice_features(noise[320:], noise[:320])[3] == 0.0


def _policy(tid: int) -> int:
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK


def test_pacing_puts_the_process_threads_under_real_time_and_gives_them_back() -> None:
    release = threading.Event()
    started: list[int] = []

    def waiter() -> None:
        started.append(threading.get_native_id())
        release.wait(10)

    def start_waiter() -> int:
        threading.Thread(target=waiter, daemon=True).start()
        while len(started) < 1 + len(threads):
            time.sleep(0.001)
        return started[-1]

    threads: list[int] = []
    threads.append(start_waiter())
    try:
        with realtime_priority(True) as realtime:
            if not realtime.on:
                pytest.skip("no real-time scheduling here (needs root or CAP_SYS_NICE)")
            assert _policy(0) == os.SCHED_FIFO and os.sched_getparam(0).sched_priority == RT_PRIORITY
            assert _policy(threads[0]) == os.SCHED_FIFO
            assert os.sched_getparam(threads[0]).sched_priority == HELPER_RT_PRIORITY
            threads.append(start_waiter())  # started while pacing: normal until promoted
            assert _policy(threads[1]) == os.SCHED_OTHER
            realtime.promote_threads()
            assert _policy(threads[1]) == os.SCHED_FIFO
        assert [_policy(t) for t in [0, *threads]] == [os.SCHED_OTHER] * 3
    finally:
        release.set()

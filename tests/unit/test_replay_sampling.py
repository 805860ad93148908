"""A device that takes each sampled channel at most N times a second (`input_max_hz`): which inputs its plan keeps,
and that the replayer sends it those and no others, on the bench's clock and on the device's own."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

from bench.replay.channels import CHANNELS
from bench.replay.pacing import Pacer
from bench.replay.plan import build_plan, sampled_at_most
from bench.replay.player import DevicePace, Replayer, Track
from bench.replay.synth import synth_session
from tests.unit.test_replay_pacing import ClockSink, FakeClock


def _plan(seconds: float = 3.0):
    return build_plan(synth_session("combat", 5, duration_s=seconds), lambda m: json.dumps(m).encode())


def test_each_sampled_channel_keeps_one_input_per_period_and_every_event() -> None:
    plan = _plan()
    kept = sampled_at_most(plan, 30)
    assert kept == sorted(kept)
    everything = Counter(p.channel for p in plan.inputs)
    sent = Counter(plan.inputs[i].channel for i in kept)
    for channel, count in everything.items():
        if CHANNELS[channel].rate_hz is None:
            assert sent[channel] == count  # events always go
        else:  # gaze 120 Hz, mocap 90 Hz, voice 100 Hz: one in each 1/30 s slot that has any (gaze has gaps)
            slots = {p.offset_ns * 30 // 1_000_000_000 for p in plan.inputs if p.channel == channel}
            assert sent[channel] == len(slots) <= 30 * 3 + 1, (channel, sent[channel])
    for channel in ("gaze", "mocap", "voice"):
        slots = [plan.inputs[i].offset_ns * 30 // 1_000_000_000 for i in kept if plan.inputs[i].channel == channel]
        assert len(slots) == len(set(slots))  # never two in one slot
    assert sampled_at_most(plan, 0) == list(range(len(plan.inputs)))
    assert len(sampled_at_most(plan, 1000)) == len(plan.inputs)  # above every channel's rate: all of them


def test_the_bench_paced_replay_sends_a_track_only_its_inputs() -> None:
    plan = _plan(1.0)
    clock = FakeClock()
    keep = frozenset(sampled_at_most(plan, 20))
    every, some = ClockSink(clock), ClockSink(clock)
    tracks = [Track("every", every), Track("some", some, keep=keep)]
    asyncio.run(Replayer(plan, Pacer(clock)).play(tracks, None))
    assert len(every.lines) == len(plan.inputs)
    assert some.lines == [plan.inputs[i].lines[tracks[1].mode] for i in sorted(keep)]
    assert tracks[1].sent == len(keep) and tracks[1].sent_by_seq(plan).keys() == {plan.inputs[i].seq for i in keep}


def test_a_device_clock_track_is_preloaded_and_fed_only_its_inputs_within_max_held() -> None:
    plan = _plan(2.0)
    clock = FakeClock()
    keep = frozenset(sampled_at_most(plan, 10))
    order = sorted(keep)
    sink = ClockSink(clock)
    track = Track("c6", sink, keep=keep)
    device_ms = [0.0]
    held_most = [0]

    def device_now_us() -> int:  # the device's clock runs 5 ms of session time per look; counts what it holds
        device_ms[0] += 5
        due = [plan.inputs[i].offset_ns / 1e6 for i in order[: len(sink.lines)]]
        held_most[0] = max(held_most[0], sum(1 for d in due if d > device_ms[0]))
        return int(device_ms[0] * 1000)

    replayer = Replayer(plan, Pacer(clock))
    preloaded = asyncio.run(replayer.preload(track, 4))
    assert sink.lines == [plan.inputs[i].lines[track.mode] for i in order[:4]]
    track.pace = DevicePace(0, device_now_us, budget_ns=10**15, hold_ms=0, tail_ms=0, preloaded=preloaded, max_held=4)

    async def feed() -> None:
        await replayer._feed(track)

    asyncio.run(feed())
    assert sink.lines == [plan.inputs[i].lines[track.mode] for i in order]
    assert not track.budget_hit and held_most[0] <= 4


def test_a_device_clock_feed_ends_when_the_devices_loop_does_not_at_its_budget() -> None:
    # a loop restarted by a recovery on a freshly booted board ends after the frames it still owed, its clock short of
    # the session's end: the feed stops with it (the frozen C6's replay waited out 3 x its budget, 135 s, before)
    plan = _plan(5.0)
    clock = FakeClock()
    sink = ClockSink(clock)
    track = Track("c6", sink)
    ended = [False]

    def device_now_us() -> int:  # the device's clock stops at 0.5 s of session time, where its loop ended
        ended[0] = True
        return 500_000

    replayer = Replayer(plan, Pacer(clock))
    track.pace = DevicePace(0, device_now_us, budget_ns=10**15, hold_ms=0, loop_over=lambda: ended[0])
    asyncio.run(replayer._feed(track))  # returns: an endless budget is never waited out
    assert track.loop_ended and not track.budget_hit
    assert 0 < track.sent < len(plan.inputs)  # up to the lookahead past the device's last clock
    bounded = Track("c6", ClockSink(clock))
    bounded.pace = DevicePace(0, lambda: 500_000, budget_ns=0, hold_ms=0)
    asyncio.run(replayer._feed(bounded))
    assert bounded.budget_hit and not bounded.loop_ended  # a budget that runs out is still told apart


def test_an_esp32c6_entry_without_input_max_hz_gets_its_kinds_30_and_others_every_input(tmp_path) -> None:
    from bench.config.fleet import load_fleet

    fleet = tmp_path / "fleet.toml"
    fleet.write_text(
        '[[device]]\nname = "c6-mine"\nkind = "esp32c6"\nvirtual = true\n\n'
        '[[device]]\nname = "c6-all"\nkind = "esp32c6"\nvirtual = true\ninput_max_hz = 0\n\n'
        '[[device]]\nname = "pi5-mine"\nkind = "pi5"\nvirtual = true\n'
    )
    devices = {d.name: d for d in load_fleet(fleet).devices}
    assert devices["c6-mine"].settings.input_max_hz == 30  # what the agent on the chip's core can take
    assert devices["c6-all"].settings.input_max_hz == 0  # asked for: every input
    assert devices["pi5-mine"].settings.input_max_hz == 0

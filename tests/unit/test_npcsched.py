"""The VSync-aligned scheduler's rules, on a fake VSync clock."""

import itertools

import npcsched
import pytest


def run(sched, vsync_hz, n, infer_us=1000, origin=1_000_000):
    """Drive the scheduler like an agent: a display loop taking VSync ticks, and an accelerator running
    the queued inferences one after another (`infer_us` each), events handled in time order."""
    clock = npcsched.VsyncClock(vsync_hz, origin)
    slots = []
    running = None
    now = origin
    while len(slots) < n or sched.pending:
        events = []
        if running is not None:
            events.append((running.t0 + infer_us, 0, "finish"))
        elif sched.next_due() is not None:
            events.append((max(sched.next_due().due, now), 1, "begin"))
        if len(slots) < n:
            events.append((clock.next_tick(), 2, "vsync"))
        when, _, what = min(events)
        now = when
        if what == "finish":
            sched.finish(running, when)
            running = None
        elif what == "begin":
            running = sched.next_due()
            sched.begin(running, when)
        else:
            slots.append(sched.on_vsync(clock.take()))
    return slots


def test_due_is_vsync_plus_frame_period():
    sched = npcsched.Scheduler(fps=60, vsync_hz=60)
    slots = run(sched, 60, 20)
    for s in slots:
        assert not s.skip and s.due == s.vsync + 16666
        assert s.t1 - s.t0 == 1000 and not s.late
    assert sched.inferences == 20 and sched.skipped == 0


def test_debounce_pushes_to_previous_plus_16ms():
    # 144 Hz VSync, 60 fps: natural dues are 6.9 ms apart, within 8 ms -> previous + 16 ms
    sched = npcsched.Scheduler(fps=60, vsync_hz=144)
    slots = [s for s in run(sched, 144, 60) if not s.skip]
    gaps = [b.due - a.due for a, b in itertools.pairwise(slots)]
    assert gaps and all(g >= 8000 for g in gaps)
    assert 16000 in gaps
    for a, b in itertools.pairwise(slots):
        natural = b.vsync + 16666
        if natural < a.due + 8000:
            assert b.due == a.due + 16000
        else:
            assert b.due == natural


def test_queue_never_exceeds_two_and_full_queue_skips():
    sched = npcsched.Scheduler(fps=60, vsync_hz=60)
    # slow inference: 40 ms per run, so the queue fills up
    slots = run(sched, 60, 60, infer_us=40000)
    assert max(s.q for s in slots) <= 2
    skipped = [s for s in slots if s.skip]
    assert skipped and all(s.key and s.q == 2 for s in skipped)
    assert any(s.late for s in slots if not s.skip)


def test_non_key_frames_skip():
    sched = npcsched.Scheduler(fps=60, vsync_hz=60, key_every=3)
    slots = run(sched, 60, 30)
    assert [s.skip for s in slots] == [i % 3 != 0 for i in range(30)]
    assert sched.inferences == 10


def test_late_when_start_after_the_vsync_following_due():
    sched = npcsched.Scheduler(fps=60, vsync_hz=60)
    slot = sched.on_vsync(0)
    sched.begin(slot, slot.due + 16665)
    assert not slot.late
    slot2 = sched.on_vsync(16666)
    sched.finish(slot, slot.due + 16700)
    sched.begin(slot2, slot2.due + 16700)
    assert slot2.late and sched.late == 1


def test_vsync_clock_does_not_drift():
    clock = npcsched.VsyncClock(60, 0)
    ticks = [clock.take() for _ in range(601)]
    assert ticks[600] == 10_000_000
    assert {b - a for a, b in itertools.pairwise(ticks)} == {16666, 16667}


def test_bad_parameters():
    with pytest.raises(ValueError):
        npcsched.Scheduler(fps=0, vsync_hz=60)
    with pytest.raises(ValueError):
        npcsched.Scheduler(fps=60, vsync_hz=60, key_every=0)


def test_from_start_defaults_and_fields():
    sched, frames, hold_ms = npcsched.from_start({"fps": 30})
    assert (sched.fps, sched.vsync_hz, sched.key_every, frames, hold_ms) == (30, 30, 1, 0, None)
    sched, frames, hold_ms = npcsched.from_start(
        {"fps": 30, "vsync_hz": 60, "key_every": 2, "frames": 90, "hold_ms": 250}
    )
    assert (sched.fps, sched.vsync_hz, sched.key_every, frames, hold_ms) == (30, 60, 2, 90, 250)


@pytest.mark.parametrize(
    ("field", "value"),
    [("fps", 0), ("vsync_hz", 1001), ("key_every", 0), ("frames", -1), ("hold_ms", 60_001), ("fps", 2.5)],
)
def test_from_start_refuses_a_field_out_of_range(field, value):
    with pytest.raises(ValueError, match=field):
        npcsched.from_start({"fps": 60, field: value})


class Taken:
    """A stand-in for the features: the inputs it took, in order; data that is not a list is refused."""

    def __init__(self) -> None:
        self.inputs: list[tuple] = []

    def add(self, ch, ts, d, seq) -> None:
        if not isinstance(d, list):
            raise ValueError("d must be a list")
        self.inputs.append((ch, ts, seq))


def test_held_inputs_are_released_in_arrival_order_when_due() -> None:
    held, taken = npcsched.Held(limit=10), Taken()
    held.hold()
    assert held.active() and held.epoch is None
    for seq, ts in enumerate((30.0, 10.0, 20.0, 50.0)):
        assert held.add(("gaze", ts, [0.1], seq), rx_us=0)
    held.start(1_000_000)  # session time 0 is device time 1 s
    assert held.release(1_020_000, taken) == () and len(held) == 4  # the first to arrive is not due yet
    held.release(1_030_000, taken)
    assert [seq for *_, seq in taken.inputs] == [0, 1, 2] and len(held) == 1  # arrival order
    held.stop()
    assert (held.dropped, len(held), held.active()) == (1, 0, False)  # the one not yet due when the loop stopped


def test_late_inputs_are_counted_and_refused_ones_keep_the_rest_going() -> None:
    held, taken = npcsched.Held(limit=3), Taken()
    held.start(1_000_000)
    assert held.add(("voice", 5.0, [0.2], 0), rx_us=1_007_500)  # due at 1.005 s, came 2.5 ms after
    assert held.add(("voice", 6.0, "not a list", 1), rx_us=0)
    assert held.add(("voice", 7.0, [0.3], 2), rx_us=0)
    assert not held.add(("voice", 8.0, [0.4], 3), rx_us=0)  # the limit: the caller answers `busy`
    with pytest.raises(ValueError):
        held.add(("voice", -1.0, [0.5], 4), rx_us=0)  # ts is checked when the input is held
    (refused,) = held.release(1_010_000, taken)
    assert "d must be a list" in str(refused) and [seq for *_, seq in taken.inputs] == [0, 2]
    assert (held.late, held.late_max_us) == (1, 2500)


def test_a_loop_without_hold_ms_drops_what_was_held_ahead() -> None:
    held = npcsched.Held(limit=4)
    held.hold()
    held.add(("gaze", 1.0, [0.1], 0), rx_us=0)
    held.start(None)
    assert (held.dropped, len(held), held.active()) == (1, 0, False)


def test_released_inputs_are_compacted_away() -> None:
    held, taken = npcsched.Held(limit=1000), Taken()
    held.start(0)
    for i in range(200):
        held.add(("gaze", float(i), [0.1], i), rx_us=0)
    held.release(150_000, taken)  # 151 released: more than half, over the batch size
    assert len(held.items) == len(held) == 49 and held.next == 0
    held.release(199_000, taken)
    assert len(taken.inputs) == 200 and len(held) == 0


def test_a_loop_that_knows_its_input_count_wants_the_next_input_until_one_is_due_after_the_time() -> None:
    held = npcsched.Held(limit=100)
    held.hold()
    held.add(("gaze", 0.0, [0.1], 0), rx_us=0)  # held ahead of the loop: counted in hold_count
    held.start(1_000_000, count=3)
    assert held.fed() and not held.wanted(999_999)  # the input taken is due at the epoch: nothing more needed before
    assert held.wanted(1_000_000)  # the loop reaches the last input taken: the next may be due then too, read it
    held.add(("gaze", 10.0, [0.1], 1), rx_us=0)
    assert not held.wanted(1_009_999) and held.wanted(1_010_000)
    held.add(("gaze", 20.0, [0.1], 2), rx_us=0)
    assert not held.fed() and not held.wanted(9_000_000)  # all 3 came: the loop runs on without input
    held.stop()
    assert held.count is None


def test_a_loop_without_hold_count_never_waits_for_input() -> None:
    held = npcsched.Held(limit=10)
    held.start(0)
    assert not held.fed() and not held.wanted(10**9)
    assert npcsched.hold_count({"t": "start"}) is None and npcsched.hold_count({"hold_count": 7}) == 7
    with pytest.raises(ValueError):
        npcsched.hold_count({"hold_count": -1})

"""The replayer: plays a plan into many sinks at once, paced on the bench clock, and keeps each send time.

A sink on the device's own clock (an emulated board whose clock is not the bench's: QEMU -icount) is not paced
here: its agent holds each input until its own clock reaches the input's due time (protocol.md, `hold_ms`). The
replayer hands it the session before its loop starts (`preload`, as much as the agent can hold) and feeds what is
left LOOKAHEAD_MS of session time ahead of the device time its frame records show. Preloaded, such a sink's
timing no longer depends on the bench keeping pace with the device's clock over the link: fed only 2 s ahead,
guests whose clocks ran on while the bench was busy got inputs seconds late (measured, docs/replay.md)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bench.core.errors import BenchError
from bench.replay.pacing import Pacer, gc_frozen, gil_switch_interval, realtime_priority
from bench.replay.plan import Plan, VoiceMode

LEAD_NS = 20_000_000  # the first input is due this long after play() starts (time to get going)
YIELD_EVERY = 32  # as fast as possible: give the event loop a turn every this many inputs
LOOKAHEAD_MS = 2000  # a device-clock sink gets inputs up to this much session time ahead of its clock (slack for
# a bench whose event loop lags behind on a loaded host: the agent holds them, so it sees them at the recorded rate)
FEED_POLL_S = 0.005  # how often a device-clock feed looks at the device's clock (its newest frame record)


@dataclass(frozen=True)
class DevicePace:
    """How a sink on the device's own clock is fed: its agent holds inputs until `epoch_us` + `ts` (device us)."""

    epoch_us: int  # device time of session time 0
    device_now_us: Callable[[], int | None]  # the newest device time the bench heard of (None before any)
    budget_ns: int  # bench time the feed may take; what does not fit is not sent
    hold_ms: int  # the agent's epoch is this long after its first VSync (the device time before any record)
    tail_ms: int = 500  # after the last input, wait until the device's clock is this far past it
    preloaded: int = 0  # the first inputs of the track already sent (Replayer.preload), held by the agent
    max_held: int | None = None  # at most this many inputs sent ahead of the device's clock (`hold`'s `max`)
    # whether the device's frame loop is over (its frames all came, or it stopped answering): its clock then moves
    # no further, and waiting for it would wait out the whole budget (a loop restarted by a recovery ends early)
    loop_over: Callable[[], bool] = lambda: False


class InputSink(Protocol):
    """Where replayed inputs go: an agent session, or anything that takes protocol lines."""

    async def send_raw(self, data: bytes) -> int:
        """Send one line; return the bench time (ns) at which it was handed to the link."""


@dataclass
class Track:
    """One sink's part of a replay: its voice mode, and per input its due and actual send times."""

    name: str
    sink: InputSink
    mode: VoiceMode = VoiceMode.PCM
    mode_reason: str = ""
    due_ns: list[int] = field(default_factory=list)  # per input in plan order (-1: not sent)
    sent_ns: list[int] = field(default_factory=list)
    sent_bytes: int = 0
    failed: str | None = None  # why the sink stopped taking inputs
    pace: DevicePace | None = None  # fed on the device's own clock (None: paced on the bench clock)
    keep: frozenset[int] | None = None  # the plan's inputs this sink is sent (None: all; plan.sampled_at_most)
    budget_hit: bool = False  # the device-clock feed ran out of its time budget before the session's end
    loop_ended: bool = False  # the device's frame loop ended before the device-clock feed sent its every input

    @property
    def sent(self) -> int:
        """How many inputs reached the link."""
        return sum(1 for s in self.sent_ns if s >= 0)

    def send_errors_ns(self) -> list[int]:
        """Actual minus scheduled send time of every sent input (ns; paced replays only)."""
        return [s - d for d, s in zip(self.due_ns, self.sent_ns, strict=True) if s >= 0 and d >= 0]

    def planned(self, plan: Plan) -> int:
        """How many of the plan's inputs this sink is sent."""
        return len(plan.inputs) if self.keep is None else len(self.keep)

    def takes(self, index: int) -> bool:
        """Whether the plan's input `index` is for this sink."""
        return self.keep is None or index in self.keep

    def sent_by_seq(self, plan: Plan) -> dict[int, int]:
        """Input seq -> bench send time (ns) of the inputs that were sent."""
        return {p.seq: s for p, s in zip(plan.inputs, self.sent_ns, strict=False) if s >= 0}


@dataclass
class ReplayOutcome:
    """What play() did."""

    speed: float | None  # None: as fast as possible
    started_ns: int
    finished_ns: int
    inputs: int  # planned
    done: int  # inputs processed (all of them unless stopped)
    tracks: list[Track]
    sleeps: int
    spins: int
    realtime: bool  # the pacer ran under a real-time scheduling priority


class Replayer:
    """Plays one plan into several sinks concurrently, one paced loop for all of them.

    `speed` scales the session's time (2.0 = twice as fast); None sends as fast as the sinks take it."""

    def __init__(self, plan: Plan, pacer: Pacer | None = None, realtime: bool = True) -> None:
        self.plan = plan
        self.pacer = pacer or Pacer()
        self.realtime = realtime
        self.done = 0  # inputs processed so far: progress displays read it

    async def play(self, tracks: list[Track], speed: float | None = 1.0) -> ReplayOutcome:
        """Send every planned input to every track's sink at its due time; a failing sink is dropped
        (its `failed` says why) and the others go on."""
        if speed is not None and speed <= 0:
            raise ValueError("speed must be positive (or None for as fast as possible)")
        paced = speed is not None
        bench = [t for t in tracks if t.pace is None]
        device = [t for t in tracks if t.pace is not None]
        with realtime_priority(self.realtime and paced) as realtime, gc_frozen(), gil_switch_interval():
            promoting = asyncio.create_task(realtime.keep_promoting())
            try:
                on = realtime.on
                bench_play = self._play(bench, speed, on) if bench or not device else self._idle(speed, on)
                outcome, *_ = await asyncio.gather(bench_play, *(self._feed(t) for t in device))
            finally:
                promoting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await promoting
        outcome.tracks = tracks
        outcome.done = max([outcome.done] + [t.sent for t in device])
        outcome.finished_ns = self.pacer.clock.now_ns()
        return outcome

    async def _idle(self, speed: float | None, realtime: bool) -> ReplayOutcome:
        """The bench-clock loop's outcome when every track is on its device's clock."""
        now = self.pacer.clock.now_ns()
        return ReplayOutcome(speed, now, now, len(self.plan.inputs), 0, [], 0, 0, realtime)

    async def preload(self, track: Track, limit: int) -> int:
        """Send the plan's first `limit` inputs to `track`'s sink now, as fast as it takes them, for an agent that
        holds them until they are due (before its loop starts: protocol.md `hold`); returns how many went out."""
        n = len(self.plan.inputs)
        track.due_ns, track.sent_ns = [-1] * n, [-1] * n
        count = 0
        for index, item in enumerate(self.plan.inputs):
            if count == limit:
                break
            if not track.takes(index):
                continue
            count += 1
            line = item.lines[track.mode]
            track.sent_ns[index] = await track.sink.send_raw(line)
            track.sent_bytes += len(line)
            if index % YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return count

    async def _feed(self, track: Track) -> None:
        """Feed one device-clock track: after the inputs it was preloaded with, each input once the device's clock
        is within LOOKAHEAD_MS (session time) of its due time, until the session ends or the track's time budget
        does. Always at the recorded rate on the device's clock (`speed` is the bench clock's). Its due times stay
        -1 (the agent releases the inputs; their fidelity is measured from its frame records)."""
        pace = track.pace
        clock = self.pacer.clock
        n = len(self.plan.inputs)
        if not pace.preloaded:
            track.due_ns, track.sent_ns = [-1] * n, [-1] * n
        deadline = clock.now_ns() + pace.budget_ns

        def session_ms() -> float:  # the device's clock in session time
            now = pace.device_now_us()
            return -pace.hold_ms if now is None else (now - pace.epoch_us) / 1000

        def over() -> bool:  # no more waiting for the device's clock: out of budget, the sink failed, the loop ended
            return clock.now_ns() >= deadline or track.failed is not None or pace.loop_over()

        async def until(ts_ms: float) -> bool:  # wait until the device's clock reaches ts_ms; False: `over`
            while session_ms() < ts_ms:
                if over():
                    return False
                await asyncio.sleep(FEED_POLL_S)
            return clock.now_ns() < deadline

        order = [i for i in range(n) if track.takes(i)]  # the inputs this sink is sent, in plan order
        due_ms = [self.plan.inputs[i].offset_ns // 1_000_000 for i in order]
        released = 0  # of them, those the device's clock has reached (the agent has let them go)

        async def room(pos: int) -> bool:  # wait until the agent holds fewer than max_held; False: out of budget
            nonlocal released
            while True:
                now_ms = session_ms()
                while released < pos and due_ms[released] <= now_ms:
                    released += 1
                if pace.max_held is None or pos - released < pace.max_held:
                    return True
                if over():
                    return False
                await asyncio.sleep(FEED_POLL_S)

        last_ms = due_ms[pace.preloaded - 1] if pace.preloaded else 0
        for pos in range(pace.preloaded, len(order)):
            index = order[pos]
            item = self.plan.inputs[index]
            last_ms = due_ms[pos]
            if not await until(last_ms - LOOKAHEAD_MS) or not await room(pos):
                track.loop_ended = track.failed is None and pace.loop_over()
                track.budget_hit = track.failed is None and not track.loop_ended
                return
            try:
                track.sent_ns[index] = await track.sink.send_raw(item.lines[track.mode])
            except (BenchError, OSError) as exc:
                track.failed = f"input #{item.seq}: {exc}"
                return
            track.sent_bytes += len(item.lines[track.mode])
            self.done = max(self.done, index + 1)  # progress displays read it
        if not await until(last_ms + pace.tail_ms) and not pace.loop_over():  # a loop over here played it all
            track.budget_hit = track.failed is None

    async def _play(self, tracks: list[Track], speed: float | None, realtime: bool) -> ReplayOutcome:
        clock = self.pacer.clock
        n = len(self.plan.inputs)
        for track in tracks:
            track.due_ns = [-1] * n
            track.sent_ns = [-1] * n
        start = clock.now_ns() + LEAD_NS
        for index, item in enumerate(self.plan.inputs):
            if speed is None:
                due = -1
                if index % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            else:
                due = start + round(item.offset_ns / speed)
                await self.pacer.wait_until(due)
            for track in tracks:
                if track.failed is not None or not track.takes(index):
                    continue
                line = item.lines[track.mode]
                try:
                    sent = await track.sink.send_raw(line)
                except (BenchError, OSError) as exc:
                    track.failed = f"input #{item.seq}: {exc}"
                    continue
                track.due_ns[index] = due
                track.sent_ns[index] = sent
                track.sent_bytes += len(line)
            self.done = index + 1
        return ReplayOutcome(
            speed=speed,
            started_ns=start,
            finished_ns=clock.now_ns(),
            inputs=n,
            done=self.done,
            tracks=tracks,
            sleeps=self.pacer.sleeps,
            spins=self.pacer.spins,
            realtime=realtime,
        )

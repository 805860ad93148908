"""The replayer: plays a plan into many sinks at once, paced on the bench clock, and keeps each send time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from bench.errors import BenchError
from bench.replay.pacing import Pacer, gc_frozen, gil_switch_interval, realtime_priority
from bench.replay.plan import Plan, VoiceMode

LEAD_NS = 20_000_000  # the first input is due this long after play() starts (time to get going)
YIELD_EVERY = 32  # as fast as possible: give the event loop a turn every this many inputs


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

    @property
    def sent(self) -> int:
        """How many inputs reached the link."""
        return sum(1 for s in self.sent_ns if s >= 0)

    def send_errors_ns(self) -> list[int]:
        """Actual minus scheduled send time of every sent input (ns; paced replays only)."""
        return [s - d for d, s in zip(self.due_ns, self.sent_ns, strict=True) if s >= 0 and d >= 0]

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
        with realtime_priority(self.realtime and paced) as realtime, gc_frozen(), gil_switch_interval():
            return await self._play(tracks, speed, realtime)

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
                if track.failed is not None:
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

"""How a replay's inputs were timed for one device, and how faithfully they reached it.

A bench-clock replay sends each input at its due time on the bench's clock: its fidelity is the send error
(actual minus scheduled send time, ns). A device-clock replay (an icount guest whose agent holds inputs until its
own clock reaches them, protocol.md `hold_ms`) has no bench send time that matters: its fidelity is the release
error, how much later an input reached an inference than the first inference that started at or after its due
time (device clock; 0 when it was there in time)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.agent.frame import Frame
from bench.measure.histogram import Histogram
from bench.measure.records import DeviceClock

SEED_ALIGNMENT_MS = 8.3  # the seed data set aligns its modalities within +-8.3 ms: a replay must do as well
CLOCK_LABELS = {"bench": "bench clock", "device": "device clock"}


@dataclass(frozen=True)
class ReplayTiming:
    """The inputs' times and the replay's extent for one device, on the clock its latency figures use.

    `clock`: "bench" (inputs_ns are bench send times), "device" (inputs_ns are due times on the device clock, in
    ns) or None (neither clock means anything for latency: those figures are not stored)."""

    clock: str | None
    inputs_ns: Mapping[int, int]  # seq -> send (bench) or due (device) time, ns
    latency_clock: DeviceClock  # maps a frame's t1 onto the clock of inputs_ns
    end_ns: int | None  # when the bench stopped listening for decisions, on that clock
    start_ns: int | None  # when the frame loop's start request went out (bench) or arrived (device)
    send_errors_ns: Sequence[int] | None  # bench-clock replays: actual - scheduled send time of every input
    session_s: float  # the session's length
    covered_s: float | None  # how much of it, from the start, was played (None: unknown)
    loop_s: float | None  # how long the frame loop ran, on that clock (None: unknown)
    vsync_hz: int
    fps: int
    budget_hit: bool = False  # a device-clock replay that ran out of its time budget before the session's end


@dataclass(frozen=True)
class ReleaseError:
    """Device-clock replay fidelity: per input, us later than due that it reached an inference."""

    histogram: Histogram  # ns, like replay_send_error
    early: int  # inputs an inference used before it was due (the agent released it early: a broken agent)


def release_error(records: Sequence[Frame], due_ns: Mapping[int, int]) -> ReleaseError:
    """For each input (seq -> due time on the device clock, ns): the `t0` of the first inference whose `seq` is at
    or past it, minus the `t0` of the first inference starting at or after its due time; inputs with either
    inference missing (the run ended first) are left out."""
    ran = sorted((r.t0, r.seq) for r in records if r.ran and r.t0 is not None)
    starts = [t0 * 1000 for t0, _ in ran]
    reached = list(itertools.accumulate((seq for _, seq in ran), max))  # highest input seq any inference has used
    hist = Histogram("replay_release_error", "ns")
    early = 0
    for seq, due in due_ns.items():
        at_due = bisect.bisect_left(starts, due)
        used = bisect.bisect_left(reached, seq)
        if at_due >= len(starts) or used >= len(starts):
            continue
        if used < at_due:
            early += 1
        hist.record(starts[used] - starts[at_due])
    return ReleaseError(hist, early)

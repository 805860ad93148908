"""What a device on its own clock was given, on that clock: the fingerprint of a replay's inputs.

A device replayed on its own counted clock (docs/replay.md) should be given the same inputs at the same counted times
every night: then its counted figures are those of the session, the model and the firmware only. This module turns a
run's frame records into what each inference had been given: how many inputs it saw since the inference before it,
and how many inputs reached the agent after they were due. The verdict compares them with the baseline's runs
(bench.results.played)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.agent.frame import Frame
from bench.measure.device import DeviceMeasurements


@dataclass(frozen=True)
class Played:
    """Per inference frame, in order, the inputs it was given since the inference before it; and the inputs that
    reached the agent after they were due (its `stats.held_late`; None when it did not say)."""

    per_frame: tuple[int, ...]
    late: int | None

    @property
    def frames(self) -> int:
        """Inference frames played."""
        return len(self.per_frame)

    @property
    def mean(self) -> float | None:
        """Inputs per inference frame (None without frames)."""
        return sum(self.per_frame) / len(self.per_frame) if self.per_frame else None


def played(frames: Iterable[Frame], sent_seqs: Sequence[int], stats: Sequence[dict]) -> Played:
    """From the frame records, the seqs of the inputs the device was sent (any order) and its `stats` replies: a
    frame record's `seq` is the newest input its features had when it inferred."""
    seqs = sorted(sent_seqs)
    per_frame, before = [], 0
    for f in sorted((f for f in frames if f.ran and f.t0 is not None), key=lambda f: f.i):
        given = bisect.bisect_right(seqs, f.seq)
        per_frame.append(max(0, given - before))
        before = max(before, given)
    late = next((int(s["held_late"]) for s in reversed(stats) if "held_late" in s), None)
    return Played(tuple(per_frame), late)


def add_played(out: DeviceMeasurements, given: Played) -> None:
    """The fingerprint's measurements (frames played are `inferences`, which every run has)."""
    mean = round(given.mean, 4) if given.mean is not None else None
    out.add("played_inputs_per_frame", mean, samples=given.frames)
    out.add("played_inputs_per_frame_max", max(given.per_frame, default=None), samples=given.frames)
    out.add("played_late", given.late)

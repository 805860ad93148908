"""Frame timing from frame records: achieved FPS, jitter against the VSync schedule, 1% low, stutters.

Definitions (PresentMon / CapFrameX, applied to inference frames, i.e. records with `ran`):
- frame time: the interval between the inference starts (`t0`) of consecutive inference frames;
- achieved FPS = 1 / mean frame time; 1% low FPS = 1 / P99 frame time;
- stutter: a frame time longer than STUTTER_FACTOR x the moving average of the previous
  STUTTER_WINDOW frame times (needs STUTTER_MIN_HISTORY of them);
- jitter: deviation of each inference start from its scheduled time (`t0 - due`, us): its standard
  deviation and the P99 of its absolute value;
- skipped / late: records with `skip` / `late` set (protocol.md).
"""

from __future__ import annotations

import itertools
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from bench.agent.frame import Frame
from bench.measure.histogram import Histogram

STUTTER_FACTOR = 2.5
STUTTER_WINDOW = 30
STUTTER_MIN_HISTORY = 5
STUTTER_RULE = f"frame time > {STUTTER_FACTOR:g}x moving average of {STUTTER_WINDOW}"  # the one wording

Us = TypeVar("Us")  # device microseconds: one value, or a numpy array of them (the report's frame trace)


def frame_time_us(previous_t0: Us, t0: Us) -> Us:
    """Frame time: from one inference frame's start to the next one's (us)."""
    return t0 - previous_t0  # type: ignore[operator]


def deviation_us(t0: Us, due: Us) -> Us:
    """Jitter of one inference frame: its start against its scheduled time, signed (us)."""
    return t0 - due  # type: ignore[operator]


@dataclass(frozen=True)
class FrameTiming:
    """Frame metrics of one device in one run."""

    frames: int  # display frames reported
    inferences: int  # frames whose inference ran
    skipped: int
    late: int
    fps: float | None
    low_1pct_fps: float | None
    stutters: int
    jitter_std_us: float | None
    jitter_p99_us: float | None
    frame_time: Histogram  # us
    deviation: Histogram  # |t0 - due| in us


def frame_timing(records: Sequence[Frame]) -> FrameTiming:
    """Compute FrameTiming from frame records (any order; sorted by frame index here)."""
    ordered = sorted(records, key=lambda r: r.i)
    ran = [r for r in ordered if r.ran and r.t0 is not None]
    times = [frame_time_us(a.t0, b.t0) for a, b in itertools.pairwise(ran)]
    frame_time = Histogram("frame_time", "us").record_all(times)
    deviations = [deviation_us(r.t0, r.due) for r in ran if r.due is not None]
    deviation = Histogram("frame_deviation", "us").record_all(abs(d) for d in deviations)
    fps = 1e6 / statistics.fmean(times) if times and statistics.fmean(times) > 0 else None
    p99 = frame_time.percentile(99) if times else None
    return FrameTiming(
        frames=len(ordered),
        inferences=len(ran),
        skipped=sum(1 for r in ordered if r.skip),
        late=sum(1 for r in ordered if r.late),
        fps=fps,
        low_1pct_fps=1e6 / p99 if p99 else None,
        stutters=count_stutters(times),
        jitter_std_us=statistics.pstdev(deviations) if len(deviations) >= 2 else None,
        jitter_p99_us=deviation.percentile(99) if deviations else None,
        frame_time=frame_time,
        deviation=deviation,
    )


def count_stutters(frame_times: Sequence[float]) -> int:
    """Frames longer than STUTTER_FACTOR x the moving average of the previous STUTTER_WINDOW frame times."""
    window: deque[float] = deque(maxlen=STUTTER_WINDOW)
    stutters = 0
    for ft in frame_times:
        if len(window) >= STUTTER_MIN_HISTORY and ft > STUTTER_FACTOR * (sum(window) / len(window)):
            stutters += 1
        window.append(ft)
    return stutters

"""Summaries of a session: per-channel counts, rates and gaps, and the whole session's span."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

from bench.replay.channels import CHANNELS
from bench.replay.recording import Session

GAP_FACTOR = 1.5  # an interval longer than this many nominal periods is a gap


@dataclass(frozen=True)
class Gap:
    """A stretch with no messages on a fixed-rate channel."""

    start_s: float  # from session start
    length_ms: float


@dataclass
class ChannelInfo:
    """One channel's figures."""

    name: str
    messages: int
    nominal_hz: float | None
    measured_hz: float
    first_s: float
    last_s: float
    max_interval_ms: float
    gaps: list[Gap] = field(default_factory=list)


@dataclass
class SessionInfo:
    """What `hilbench session info` reports."""

    path: str
    session_id: str
    scenario: str
    duration_s: float
    messages: int
    channels: list[ChannelInfo]
    meta: dict[str, str]

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def session_info(session: Session) -> SessionInfo:
    """Per-channel figures of `session`; gaps only for channels with a nominal rate."""
    start = session.start_ns
    by_channel: dict[str, list[int]] = {}
    for msg in session.messages:
        by_channel.setdefault(msg.channel, []).append(msg.ts_ns)
    channels = []
    for name in session.channels():
        times = by_channel[name]
        nominal = CHANNELS[name].rate_hz
        intervals = [b - a for a, b in itertools.pairwise(times)]
        span = (times[-1] - times[0]) / 1e9
        gaps = []
        if nominal:
            limit = GAP_FACTOR * 1e9 / nominal
            gaps = [
                Gap(round((a - start) / 1e9, 3), round((b - a) / 1e6, 1))
                for a, b in itertools.pairwise(times)
                if b - a > limit
            ]
        channels.append(
            ChannelInfo(
                name=name,
                messages=len(times),
                nominal_hz=nominal,
                measured_hz=round((len(times) - 1) / span, 2) if span > 0 else 0.0,
                first_s=round((times[0] - start) / 1e9, 3),
                last_s=round((times[-1] - start) / 1e9, 3),
                max_interval_ms=round(max(intervals) / 1e6, 1) if intervals else 0.0,
                gaps=gaps,
            )
        )
    return SessionInfo(
        path=str(session.path or ""),
        session_id=session.session_id,
        scenario=session.scenario,
        duration_s=round(session.duration_s, 3),
        messages=len(session.messages),
        channels=channels,
        meta=dict(session.meta),
    )

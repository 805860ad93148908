"""A replay plan: every session message as a ready-to-send `in` line, per voice mode, with its due offset.

Encoding everything before playing keeps JSON work out of the paced loop."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bench.config.fleet import Link
from bench.replay.channels import CHANNELS
from bench.replay.recording import BadSessionMessage, Session
from bench.replay.voice_features import voice_features

# Replayed inputs may use at most this share of a byte-limited link's bench->device direction (a UART is
# full duplex: frame records come back on the other wire); the rest is headroom for requests and bursts.
LINK_SHARE = 0.8


class VoiceMode(StrEnum):
    """How the voice channel goes on the wire."""

    PCM = "voice"  # base64 int16 PCM, 10 ms chunks
    FEATURES = "voicef"  # per-10 ms [rms, zcr, pitch_hz, voiced]


@dataclass(frozen=True, slots=True)
class PlannedInput:
    """One input to send: due `offset_ns` after the replay starts (at 1x), and its line per voice mode."""

    offset_ns: int
    seq: int
    channel: str
    lines: dict[VoiceMode, bytes]


@dataclass(frozen=True)
class Plan:
    """All inputs of a session, in send order."""

    session_id: str
    inputs: list[PlannedInput]
    duration_ns: int

    def bytes_per_s(self, mode: VoiceMode) -> float:
        """Average wire bytes per second of the inputs in `mode`."""
        total = sum(len(p.lines[mode]) for p in self.inputs)
        return total / max(self.duration_ns / 1e9, 1e-3)


def build_plan(session: Session, encode: Callable[[dict[str, Any]], bytes]) -> Plan:
    """Encode every message of `session` as `in` lines (with `encode`, the wire codec) in both voice modes."""
    start = session.start_ns
    inputs = []
    previous_voice = b""
    for seq, msg in enumerate(session.messages):
        ts_ms = (msg.ts_ns - start) // 1_000_000
        base = {"t": "in", "seq": seq, "ts": ts_ms}
        if msg.channel == "voice":
            pcm_line = encode({**base, "ch": "voice", "d": base64.b64encode(msg.value).decode()})
            feat_line = encode({**base, "ch": "voicef", "d": voice_features(msg.value, previous_voice)})
            previous_voice = msg.value
            lines = {VoiceMode.PCM: pcm_line, VoiceMode.FEATURES: feat_line}
        else:
            spec = CHANNELS[msg.channel]
            d = [round(v, spec.wire_decimals) for v in msg.value] if spec.floats else msg.value
            try:
                line = encode({**base, "ch": msg.channel, "d": d})
            except ValueError as exc:  # over the protocol's line limit: the agent could never read it
                raise BadSessionMessage(
                    f"{session.path or session.session_id}: {msg.channel} message #{seq} at {msg.ts_ns} ns: {exc}",
                    hint="an event must fit one protocol line; shorten it or record the session again",
                    file=str(session.path) if session.path else None,
                ) from None
            lines = {VoiceMode.PCM: line, VoiceMode.FEATURES: line}
        inputs.append(PlannedInput(msg.ts_ns - start, seq, msg.channel, lines))
    duration = session.messages[-1].ts_ns - start if session.messages else 0
    return Plan(session.session_id, inputs, duration)


def sampled_at_most(plan: Plan, max_hz: float) -> list[int]:
    """The indices of `plan`'s inputs a device that takes each sampled channel (voice, gaze, mocap: those with a
    nominal rate) at most `max_hz` times a second is sent: per channel, the first input of each 1/max_hz of
    session time. Events always go. `max_hz` 0: every input."""
    if max_hz <= 0:
        return list(range(len(plan.inputs)))
    period_ns = 1e9 / max_hz
    last_slot: dict[str, int] = {}
    kept = []
    for index, item in enumerate(plan.inputs):
        spec = CHANNELS.get(item.channel)
        if spec is not None and spec.rate_hz is not None:
            slot = int(item.offset_ns // period_ns)
            if last_slot.get(item.channel) == slot:
                continue
            last_slot[item.channel] = slot
        kept.append(index)
    return kept


def link_bytes_per_s(link: Link | None) -> float | None:
    """What a link can carry (bytes/s), or None when it is not the bottleneck (TCP, SSH, virtio)."""
    return link.bytes_per_s if link is not None else None


@dataclass(frozen=True)
class VoiceChoice:
    """The voice mode for one device and why."""

    mode: VoiceMode
    reason: str


def choose_voice_mode(plan: Plan, capacity: float | None, speed: float = 1.0) -> VoiceChoice:
    """PCM unless the inputs at `speed` would take more than LINK_SHARE of a byte-limited link."""
    if capacity is None:
        return VoiceChoice(VoiceMode.PCM, "link not byte-limited")
    need = plan.bytes_per_s(VoiceMode.PCM) * speed
    budget = LINK_SHARE * capacity
    if need <= budget:
        return VoiceChoice(VoiceMode.PCM, f"PCM needs {need:.0f} B/s of {capacity:.0f} B/s")
    feat = plan.bytes_per_s(VoiceMode.FEATURES) * speed
    note = "" if feat <= budget else f"; even features exceed {LINK_SHARE:.0%} of the link: expect backlog"
    return VoiceChoice(
        VoiceMode.FEATURES, f"PCM needs {need:.0f} B/s, link carries {capacity:.0f} B/s: voice features{note}"
    )

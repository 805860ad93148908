"""The session channels: what each carries, at what rate, and how its payload is encoded in MCAP."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

from bench.agent.wire import MAX_DEPTH, MAX_LINE, shallow

VOICE_RATE_HZ = 16_000
VOICE_CHUNK_MS = 10
VOICE_CHUNK_SAMPLES = VOICE_RATE_HZ * VOICE_CHUNK_MS // 1000  # 160
MOCAP_JOINTS = 17
# Human3.6M's 17-joint skeleton, in payload order (each joint x, y, z in metres; y up).
MOCAP_JOINT_NAMES = (
    "pelvis", "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle", "spine", "thorax",
    "neck", "head", "l_shoulder", "l_elbow", "l_wrist", "r_shoulder", "r_elbow", "r_wrist",
)  # fmt: skip

MAX_TIMESTAMP_MS = 2**53  # an event's own clock: a whole number every agent reads exactly (a JavaScript number)
EVENT_MAX_BYTES = MAX_LINE - 128
"""The largest JSON action/event payload: it must fit one agent protocol line with the `in` frame around it."""

EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "npc player action / game event",
    "type": "object",
    "required": ["session_id", "timestamp_ms", "action", "target_id", "context"],
    "properties": {
        "session_id": {"type": "string"},
        "timestamp_ms": {"type": "integer"},
        "action": {"type": "string"},
        "target_id": {"type": ["string", "null"]},
        "context": {
            "type": "object",
            "required": ["hp_ratio", "aggro_level"],
            "properties": {"hp_ratio": {"type": "number"}, "aggro_level": {"type": "number"}},
        },
    },
}


class PayloadError(ValueError):
    """A message payload that does not match its channel's encoding."""


@dataclass(frozen=True)
class ChannelSpec:
    """One session channel: its MCAP topic and encoding, nominal rate (None when event-driven)."""

    name: str  # the wire protocol's `ch`
    topic: str
    encoding: str  # MCAP message encoding
    rate_hz: float | None
    floats: int = 0  # for f32le channels: values per message
    description: str = ""
    wire_decimals: int = 6  # f32le values are rounded to this many decimals in `in` messages (shorter lines)

    def encode(self, value: Any) -> bytes:
        """The MCAP payload for one message value (bytes for voice, float sequence, or event dict)."""
        if self.encoding == "pcm_s16le":
            if not isinstance(value, bytes | bytearray) or len(value) != 2 * VOICE_CHUNK_SAMPLES:
                raise PayloadError(f"voice chunk must be {2 * VOICE_CHUNK_SAMPLES} bytes")
            return bytes(value)
        if self.encoding == "f32le":
            if len(value) != self.floats:
                raise PayloadError(f"{self.name} message must have {self.floats} values, got {len(value)}")
            _check_finite(value)
            return struct.pack(f"<{self.floats}f", *value)
        check_event(value)
        return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()

    def decode(self, payload: bytes) -> Any:
        """The value of one MCAP payload; PayloadError when it does not fit the channel."""
        if self.encoding == "pcm_s16le":
            if len(payload) != 2 * VOICE_CHUNK_SAMPLES:
                raise PayloadError(f"voice chunk has {len(payload)} bytes, expected {2 * VOICE_CHUNK_SAMPLES}")
            return payload
        if self.encoding == "f32le":
            if len(payload) != 4 * self.floats:
                raise PayloadError(f"{self.name} payload has {len(payload)} bytes, expected {4 * self.floats}")
            return _check_finite(struct.unpack(f"<{self.floats}f", payload))
        if len(payload) > EVENT_MAX_BYTES:
            raise PayloadError(f"{len(payload)} bytes, over the {EVENT_MAX_BYTES}-byte limit (one protocol line)")
        try:
            value = json.loads(payload, parse_constant=_no_constant, parse_float=_finite_float)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, NaN/Infinity, 1e400, nested too deep
            raise PayloadError(f"not JSON: {exc}") from None
        check_event(value)
        return value


def _check_finite(values: Any) -> Any:
    """`values`, or PayloadError naming the first NaN or infinite one (the wire protocol carries finite numbers
    only: a sensor dropout is a missing message, or the channel's own "no data" value such as confidence 0)."""
    for n, v in enumerate(values):
        if not math.isfinite(v):
            raise PayloadError(f"value {n} is {v!r}: NaN and infinity are not replayed (record a dropout as a gap)")
    return values


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (NaN and infinity are not replayed)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of range for a number")
    return value


def check_event(value: Any) -> None:
    """Raise PayloadError unless `value` follows the product's event schema."""
    if not isinstance(value, dict):
        raise PayloadError("event must be a JSON object")
    for key in EVENT_SCHEMA["required"]:
        if key not in value:
            raise PayloadError(f"event lacks field {key!r}")
    if not isinstance(value["session_id"], str) or not isinstance(value["action"], str):
        raise PayloadError("event fields 'session_id' and 'action' must be strings")
    ts = value["timestamp_ms"]
    if isinstance(ts, bool) or not isinstance(ts, int) or abs(ts) > MAX_TIMESTAMP_MS:
        raise PayloadError("event field 'timestamp_ms' must be a whole number within ±2^53")
    ctx = value["context"]
    numbers = [ctx.get(k) for k in ("hp_ratio", "aggro_level")] if isinstance(ctx, dict) else []
    if not numbers or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
        raise PayloadError("event field 'context' must hold numbers 'hp_ratio' and 'aggro_level'")
    if not shallow(b"[" + json.dumps(value).encode() + b"]"):  # as deep as in the `in` line around it
        raise PayloadError(f"event nests arrays and objects deeper than {MAX_DEPTH - 1} (the protocol's limit)")
    _check_finite([ctx["hp_ratio"], ctx["aggro_level"]])


CHANNELS: dict[str, ChannelSpec] = {
    c.name: c
    for c in (
        ChannelSpec("voice", "/voice", "pcm_s16le", 1000 / VOICE_CHUNK_MS, 0, "16 kHz mono int16 PCM, 10 ms chunks"),
        ChannelSpec("gaze", "/gaze", "f32le", 120.0, 3, "eye tracker: x, y (screen 0..1), confidence 0..1", 4),
        ChannelSpec("mocap", "/mocap", "f32le", 90.0, 3 * MOCAP_JOINTS, "17 joints x, y, z in metres", 3),
        ChannelSpec("action", "/action", "json", None, 0, "player actions (product event schema)"),
        ChannelSpec("event", "/event", "json", None, 0, "game events (product event schema)"),
    )
}
BY_TOPIC: dict[str, ChannelSpec] = {c.topic: c for c in CHANNELS.values()}

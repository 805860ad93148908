"""Deterministic session generator: plausible voice, gaze, motion and event streams for test scenarios.

Same scenario + seed -> the same messages, bit for bit. The signals are shaped like the real thing
(speech bursts and silence, saccades/fixations/blinks, walking and attack motions, scenario-specific
event mixes) so that agents' feature windows see realistic input, not noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.core.errors import ConfigError
from bench.replay.channels import MOCAP_JOINTS, VOICE_CHUNK_SAMPLES, VOICE_RATE_HZ
from bench.replay.recording import Session, messages_from, write_session

EPOCH_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z: sessions carry wall-clock-like timestamps


@dataclass(frozen=True)
class Scenario:
    """What a generated session looks like."""

    name: str
    duration_s: float
    talk_share: float  # fraction of time the player speaks
    walk_share: float  # fraction of time walking (rest: idle or attacking)
    attack_rate_hz: float  # attack motions per second
    actions: dict[str, float]  # player action -> weight
    events: dict[str, float]  # game event -> weight
    action_rate_hz: float
    event_rate_hz: float
    gaze_dropouts: int = 0  # eye-tracker losses (no samples at all for 0.2-0.6 s)
    description: str = ""


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "combat",
            30.0,
            0.25,
            0.35,
            0.8,
            {"attack": 5, "dodge": 2, "block": 2, "use_item": 1, "taunt": 0.5},
            {"damage_taken": 4, "enemy_spawn": 1, "enemy_killed": 1.5, "low_hp_warning": 0.5},
            2.5,
            1.5,
            1,
            "fight: shouting, fast saccades, attacks, hp falling, aggro high",
        ),
        Scenario(
            "dialogue",
            30.0,
            0.6,
            0.05,
            0.0,
            {"talk": 5, "choose_option": 3, "give_item": 0.5, "wave": 0.5},
            {"npc_line": 4, "quest_update": 1, "reputation_change": 0.5},
            0.6,
            0.5,
            0,
            "conversation with an NPC: long speech turns, steady gaze on the face",
        ),
        Scenario(
            "exploration",
            40.0,
            0.1,
            0.6,
            0.02,
            {"move": 4, "look": 3, "interact": 1, "open_door": 0.5, "idle": 1},
            {"area_enter": 1, "item_found": 1, "ambient": 2},
            0.5,
            0.3,
            2,
            "walking and idling: occasional remarks, wandering gaze, tracker dropouts",
        ),
    )
}


def synth_session(scenario: str, seed: int = 0, duration_s: float | None = None) -> Session:
    """Generate one session of `scenario` (see SCENARIOS) deterministically from `seed`."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}", hint=f"scenarios: {', '.join(SCENARIOS)}")
    sc = SCENARIOS[scenario]
    duration = sc.duration_s if duration_s is None else duration_s
    if not 1.0 <= duration <= 3600:
        raise ConfigError(f"--duration {duration}: must be between 1 and 3600 s")
    rng = np.random.default_rng([seed, sum(map(ord, scenario))])
    session_id = f"{scenario}-{seed:04d}"
    items: list[tuple[int, str, object]] = []
    items += _voice(rng, sc, duration)
    items += _gaze(rng, sc, duration)
    items += _mocap(rng, sc, duration)
    items += _events(rng, sc, duration, session_id)
    meta = {"generator": "bench.replay.synth", "seed": str(seed), "description": sc.description}
    return Session(session_id, scenario, messages_from(items), meta)


def write_fixtures(directory: Path, seed: int = 0) -> list[Path]:
    """Generate every scenario into `directory` as <scenario>.mcap; return the paths."""
    paths = []
    for name in SCENARIOS:
        path = directory / f"{name}.mcap"
        write_session(path, synth_session(name, seed))
        paths.append(path)
    return paths


def _t(seconds: float) -> int:
    return EPOCH_NS + round(seconds * 1e9)


def _q(value: float, steps: int) -> float:
    """`value` rounded to a binary fraction 1/steps: exact in float32, and compresses well."""
    return round(value * steps) / steps


def _spans(rng: np.random.Generator, duration: float, share: float, on: tuple, off: tuple) -> list[tuple[float, float]]:
    """Alternating on/off spans covering about `share` of `duration`: list of (start, end) of the 'on' spans."""
    spans, t = [], float(rng.uniform(0.2, 1.5))
    if share <= 0:
        return spans
    off_scale = (1 - share) / share
    while t < duration:
        length = float(rng.uniform(*on))
        spans.append((t, min(duration, t + length)))
        t += length + float(rng.uniform(*off)) * off_scale
    return spans


def _voice(rng: np.random.Generator, sc: Scenario, duration: float) -> list[tuple[int, str, object]]:
    """Speech bursts (voiced syllables with pitch contours, formant-ish harmonics); digital silence between
    (the capture is noise-suppressed, as game voice chat is)."""
    n = int(duration * VOICE_RATE_HZ) // VOICE_CHUNK_SAMPLES * VOICE_CHUNK_SAMPLES
    signal = np.zeros(n)
    loud = 3500 if sc.name == "combat" else 1500  # peaks near -20 dBFS (shouting) / -30 dBFS
    for start, end in _spans(rng, duration, sc.talk_share, (0.6, 2.8), (0.4, 1.2)):
        t = start
        while t < end - 0.08:
            syl = float(rng.uniform(0.12, 0.28))
            i0, i1 = int(t * VOICE_RATE_HZ), min(n, int((t + syl) * VOICE_RATE_HZ))
            k = np.arange(i1 - i0) / VOICE_RATE_HZ
            f0 = float(rng.uniform(95, 210)) * (1 + 0.15 * np.sin(np.pi * k / syl))
            phase = 2 * np.pi * np.cumsum(f0) / VOICE_RATE_HZ
            formant = float(rng.uniform(500, 900))
            wave = sum(np.sin(h * phase) / h * np.exp(-(((h * f0) - formant) ** 2) / 4e5) for h in range(1, 9))
            envelope = np.sin(np.pi * k / syl) ** 2
            breath = rng.normal(0, 0.01, i1 - i0)  # aspiration noise, only while speaking
            signal[i0:i1] += loud * float(rng.uniform(0.5, 1.0)) * envelope * (wave + breath)
            t += syl + float(rng.uniform(0.02, 0.09))
    pcm = np.clip(np.round(signal), -32768, 32767).astype("<i2")
    chunks = pcm.reshape(-1, VOICE_CHUNK_SAMPLES)
    return [(_t(i * 0.010), "voice", chunk.tobytes()) for i, chunk in enumerate(chunks)]


def _gaze(rng: np.random.Generator, sc: Scenario, duration: float) -> list[tuple[int, str, object]]:
    """Fixations (drift + tremor) joined by fast saccades; blinks drop confidence; dropouts drop samples."""
    period = 1 / 120
    n = int(duration * 120)
    dropouts = [
        (float(rng.uniform(0.1, 0.9)) * duration, float(rng.uniform(0.2, 0.6))) for _ in range(sc.gaze_dropouts)
    ]
    x, y = 0.5, 0.5
    target = (x, y)
    next_saccade, saccade_end, blink_until = 0.0, -1.0, -1.0
    spread = {"combat": 0.35, "dialogue": 0.08, "exploration": 0.3}[sc.name]
    out = []
    for i in range(n):
        t = i * period
        if t >= next_saccade:
            target = (
                float(np.clip(0.5 + rng.normal(0, spread), 0.02, 0.98)),
                float(np.clip(0.5 + rng.normal(0, spread * 0.7), 0.02, 0.98)),
            )
            saccade_end = t + float(rng.uniform(0.02, 0.05))
            next_saccade = saccade_end + float(rng.uniform(0.15, 0.5 if sc.name != "dialogue" else 0.9))
            if rng.random() < 0.08:
                blink_until = t + float(rng.uniform(0.1, 0.15))
        if t < saccade_end:  # ballistic move: cover most of the remaining distance each sample
            x += (target[0] - x) * 0.6
            y += (target[1] - y) * 0.6
        else:
            x += float(rng.normal(0, 0.0015))
            y += float(rng.normal(0, 0.0015))
        conf = float(rng.uniform(0.02, 0.1)) if t < blink_until else float(rng.uniform(0.9, 0.99))
        if any(s <= t < s + d for s, d in dropouts):
            continue
        out.append((_t(t), "gaze", (_q(x, 8192), _q(y, 8192), _q(conf, 1024))))
    return out


# Rest pose (metres, y up, facing +z), Human3.6M joint order.
_REST = np.array(
    [
        [0, 0.95, 0], [-0.12, 0.93, 0], [-0.13, 0.52, 0.02], [-0.13, 0.08, 0], [0.12, 0.93, 0], [0.13, 0.52, 0.02],
        [0.13, 0.08, 0], [0, 1.18, 0], [0, 1.42, 0], [0, 1.52, 0.02], [0, 1.65, 0.03], [0.19, 1.42, 0],
        [0.24, 1.15, 0], [0.26, 0.9, 0.05], [-0.19, 1.42, 0], [-0.24, 1.15, 0], [-0.26, 0.9, 0.05],
    ]
)  # fmt: skip


def _mocap(rng: np.random.Generator, sc: Scenario, duration: float) -> list[tuple[int, str, object]]:
    """Idle sway, walking gait (leg/arm swing, root moving forward), and right-arm attack strikes."""
    period = 1 / 90
    n = int(duration * 90)
    walking = _spans(rng, duration, sc.walk_share, (2.0, 6.0), (1.0, 3.0))
    attacks = sorted(float(rng.uniform(0, duration)) for _ in range(int(sc.attack_rate_hz * duration)))
    root = np.zeros(3)
    out = []
    for i in range(n):
        t = i * period
        pose = _REST.copy()
        pose[:, 1] += 0.005 * np.sin(2 * np.pi * 0.25 * t)  # breathing
        if any(s <= t < e for s, e in walking):
            phase = 2 * np.pi * 1.8 * t
            swing = 0.25 * np.sin(phase)
            pose[[2, 3], 2] += swing * np.array([0.5, 1.0])
            pose[[5, 6], 2] -= swing * np.array([0.5, 1.0])
            pose[[12, 13], 2] += swing * np.array([0.4, 0.8])
            pose[[15, 16], 2] -= swing * np.array([0.4, 0.8])
            pose[:, 1] += 0.02 * np.abs(np.sin(phase))
            root[2] += 1.3 * period
        strike = next((t - a for a in attacks if 0 <= t - a < 0.45), None)
        if strike is not None:  # wind up, strike forward and up, recover
            reach = np.sin(np.pi * strike / 0.45)
            pose[15] += [0.05 * reach, 0.15 * reach, 0.25 * reach]
            pose[16] += [0.1 * reach, 0.35 * reach, 0.55 * reach]
            pose[[7, 8, 9, 10], 2] += 0.06 * reach
        pose += root + rng.normal(0, 0.0003, pose.shape)  # marker noise
        out.append((_t(t), "mocap", tuple(_q(float(v), 1024) for v in pose.reshape(-1))))
    assert pose.shape == (MOCAP_JOINTS, 3)
    return out


def _events(rng: np.random.Generator, sc: Scenario, duration: float, session_id: str) -> list[tuple[int, str, object]]:
    """Poisson-timed player actions and game events; hp and aggro evolve with the scenario."""
    out = []
    hp, aggro = 1.0, {"combat": 0.7, "dialogue": 0.05, "exploration": 0.15}[sc.name]
    for channel, rate, weights in (("action", sc.action_rate_hz, sc.actions), ("event", sc.event_rate_hz, sc.events)):
        names = list(weights)
        probs = np.array([weights[k] for k in names], dtype=float)
        probs /= probs.sum()
        t = float(rng.exponential(1 / rate))
        while t < duration:
            name = names[int(rng.choice(len(names), p=probs))]
            if name in ("damage_taken", "low_hp_warning"):
                hp = max(0.05, hp - float(rng.uniform(0.02, 0.08)))
            elif name == "use_item":
                hp = min(1.0, hp + 0.2)
            aggro = float(np.clip(aggro + rng.normal(0, 0.05), 0, 1))
            ts = _t(t)
            target = None if name in ("idle", "look", "ambient", "move") else f"npc-{int(rng.integers(1, 6))}"
            out.append(
                (
                    ts,
                    channel,
                    {
                        "session_id": session_id,
                        "timestamp_ms": ts // 1_000_000,
                        "action": name,
                        "target_id": target,
                        "context": {"hp_ratio": round(hp, 3), "aggro_level": round(aggro, 3)},
                    },
                )
            )
            t += float(rng.exponential(1 / rate))
    return out

"""Windowed features: layout, windowing, determinism, malformed input."""

import base64
import math
import struct

import npcfeat
import pytest


def pcm_tone(freq, amp, n=160, rate=16000):
    return struct.pack(f"<{n}h", *[round(amp * math.sin(2 * math.pi * freq * k / rate)) for k in range(n)])


def test_empty_vector_is_zeros():
    assert npcfeat.Features().vector() == [0.0] * npcfeat.N_FEATURES == [0.0] * 48


def test_voice_features_of_a_tone_and_silence():
    rms, _zcr, pitch, voiced = npcfeat.voice_features(pcm_tone(200, 10000))
    assert rms == pytest.approx(10000 / 32768 / math.sqrt(2), rel=0.02)
    assert voiced == 1 and pitch == pytest.approx(200, rel=0.1)
    assert npcfeat.voice_features(bytes(320))[0] == 0.0
    assert npcfeat.voice_features(b"")[3] == 0


def test_voice_pcm_and_voicef_give_the_same_vector():
    pcm = pcm_tone(220, 8000)
    a, b = npcfeat.Features(), npcfeat.Features()
    a.add("voice", 10, base64.b64encode(pcm).decode())
    b.add("voicef", 10, npcfeat.voice_features(pcm))
    assert a.vector() == b.vector()
    assert a.vector()[0] > 0


def test_gaze_and_events_land_in_their_slots():
    f = npcfeat.Features()
    f.add("gaze", 0, [0.2, 0.4, 0.9], seq=0)
    f.add("gaze", 8, [0.4, 0.4, 0.7], seq=1)
    ev = {
        "session_id": "s",
        "timestamp_ms": 9,
        "action": "defend",
        "target_id": 2,
        "context": {"hp_ratio": 0.25, "aggro_level": 0.8},
    }
    f.add("event", 9, ev, seq=2)
    v = f.vector()
    assert v[8] == pytest.approx(0.3) and v[9] == pytest.approx(0.4)
    assert v[12] == pytest.approx(0.8) and v[13] == pytest.approx(0.4)
    assert v[36:42] == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert v[42] == 0.25 and v[43] == 0.8 and v[45] == 1.0
    assert f.seq == 2


def test_window_drops_old_samples_and_unknown_action_is_other():
    f = npcfeat.Features(window_ms=100)
    f.add("gaze", 0, [0.9, 0.9, 1.0])
    f.add("gaze", 150, [0.1, 0.1, 1.0])
    assert f.vector()[8] == pytest.approx(0.1)
    f.add("action", 160, {"action": "dance", "target_id": 1, "context": {}})
    assert f.vector()[41] == 1.0


def test_mocap_summary_and_motion():
    f = npcfeat.Features()
    pose = [0.0] * 51
    pose[1] = 1.7  # nose y
    for k, ts in enumerate((0, 11, 22)):
        p = list(pose)
        for j in range(17):
            p[3 * j] += 0.01 * k  # the body moves +x by 1 cm per sample
        p[27] += 0.005 * k  # and the left wrist 5 mm further
        f.add("mocap", ts, p)
    v = f.vector()
    scale = npcfeat.MOCAP_SCALE_M
    assert v[22] == pytest.approx(1.7 / scale)  # head above hips
    assert v[30] == pytest.approx(0.02 / scale / 0.022)  # hips x velocity
    assert v[31] == 0.0 and v[34] == 0.0
    assert v[33] == pytest.approx(0.01 / scale / 0.022)  # left wrist speed relative to the hips
    assert all(-1.0 <= x <= 1.0 for x in v)


@pytest.mark.parametrize(
    ("ch", "d"),
    [("gaze", [1, 2]), ("mocap", [0.0] * 50), ("voicef", [1]), ("event", "attack"), ("smell", [1])],
)
def test_malformed_inputs_raise_value_error(ch, d):
    with pytest.raises(ValueError):
        npcfeat.Features().add(ch, 0, d)


def random_stream(seed, n=600):
    """A reproducible input stream over every channel (pure-Python `random`: the same on every machine)."""
    import random

    rng = random.Random(seed)
    ts = 0.0
    for seq in range(n):
        ts += rng.choice((0.0, 0.5, 3.0, 11.0, 40.0, 300.0))
        ch = rng.choice(("gaze", "gaze", "voicef", "mocap", "mocap", "event"))
        if ch == "gaze":
            d = [rng.uniform(-0.2, 1.2), rng.uniform(-0.2, 1.2), rng.random()]
        elif ch == "voicef":
            d = [rng.random(), rng.random() * 0.5, rng.uniform(0, 400), rng.choice((0, 1))]
        elif ch == "mocap":
            d = [rng.uniform(-2.5, 2.5) for _ in range(51)]
        else:
            action = rng.choice((*npcfeat.ACTIONS, "dance"))
            d = {"action": action, "target_id": rng.choice((1, 2)), "context": {"hp_ratio": rng.random()}}
        yield ch, ts, d, seq


# sha256 of every vector of the streams below, packed as float64: computed with the straightforward
# implementation before any optimisation. A faster vector() must give the same bits.
GOLDEN_VECTORS_SHA256 = "ad7ed38b0dd81c887b08f29261803b2d6afd0d8688c08d92615158c740665275"


def vectors_digest():
    """sha256 of every vector of the streams of seeds 0 to 5, packed as float64 (test_interpreters runs this
    function's source under each supported CPython)."""
    import hashlib

    digest = hashlib.sha256()
    for seed in range(6):
        feats = npcfeat.Features()
        for ch, ts, d, seq in random_stream(seed):
            feats.add(ch, ts, d, seq)
            digest.update(struct.pack("<48d", *feats.vector()))
    return digest.hexdigest()


def test_vectors_are_bit_for_bit_those_of_the_reference_implementation():
    assert vectors_digest() == GOLDEN_VECTORS_SHA256

"""micropython/npcnn.py under CPython: same integers as the numpy reference, clear parse errors."""

import npcnn
import pytest

from bench.models import model_file
from bench.models.policy import calibration_inputs
from bench.models.tflite_read import read_int8_policy
from bench.testkit import reference as R

INPUTS = calibration_inputs(48, 60, "npcnn-unit")


@pytest.mark.parametrize("name", ["npc-policy-int8", "npc-policy-int8-v2", "npc-policy-63k-int8"])
def test_npcnn_matches_the_reference_exactly(name):
    model = npcnn.load(str(model_file(name, "npcm")))
    p = read_int8_policy(model_file(name))
    x_q = R.quantize_input(INPUTS, p.mlp.in_scale, p.mlp.in_zp)
    assert [model.quantize(list(row)) for row in INPUTS] == x_q.tolist()
    ref = R.int8_infer(p.mlp, x_q)
    got = [model.infer(list(row)) for row in INPUTS]
    assert [g[2] for g in got] == ref.tolist()
    assert [g[0] for g in got] == ref.argmax(axis=1).tolist()
    assert all(abs(g[1] - (int(ref[i].max()) + 128) / 256) < 1e-9 for i, g in enumerate(got))


def test_requantize_rounds_like_tflite():
    m, shift = 1 << 30, -1  # x 0.25
    assert [npcnn.requantize(a, m, shift) for a in (6, -6, 2, -2, 10, -10)] == [2, -2, 1, -1, 3, -3]
    assert npcnn.requantize(3, 1 << 30, 1) == 3  # x 1.0 via a left shift


def test_parse_errors_name_the_problem():
    good = model_file("npc-policy-int8", "npcm").read_bytes()
    with pytest.raises(npcnn.ModelError, match="needs"):
        npcnn.Model(model_file("npc-fault-broken-int8", "npcm").read_bytes())
    with pytest.raises(npcnn.ModelError, match=r"not an \.npcm"):
        npcnn.Model(b"XXXX" + good[4:])
    with pytest.raises(npcnn.ModelError, match="trailing"):
        npcnn.Model(good + b"\0" * 4)


def test_crash_model_loads_and_fails_at_inference():
    model = npcnn.load(str(model_file("npc-fault-crash-int8", "npcm")))
    with pytest.raises(IndexError):
        model.infer([0.0] * 48)


def test_wrong_feature_count_is_refused():
    model = npcnn.load(str(model_file("npc-policy-int8", "npcm")))
    with pytest.raises(ValueError, match="48 features"):
        model.infer([0.0] * 47)


def test_weights_and_sizes_reported():
    model = npcnn.load(str(model_file("npc-policy-int8", "npcm")))
    assert model.n_features == 48 and model.n_actions == 8
    assert model.weight_bytes == 48 * 64 + 64 * 32 + 32 * 8 + 9 * (64 + 32 + 8)
    assert len(model.layers[0].w) == 64 * 48

"""The fixture models: deterministic bytes, and the numpy reference's integer arithmetic."""

import hashlib
import itertools

import numpy as np
import pytest

from bench.core.errors import ConfigError
from bench.core.paths import MODELS_DIR
from bench.models import model_file, npcm
from bench.models.catalogue import OVERSIZE_LAYERS, build_all, policy, sha256sums
from bench.models.policy import calibration_inputs, quantize_multiplier
from bench.models.tflite_read import read_int8_policy
from bench.testkit import reference as R


@pytest.fixture(scope="module")
def built() -> dict[str, bytes]:
    return build_all()


def test_generation_is_deterministic_and_matches_the_committed_files(built):
    assert build_all() == built
    for name, data in built.items():
        assert (MODELS_DIR / name).read_bytes() == data, f"{name} is stale: run fixtures/models/generate.py"
    assert (MODELS_DIR / "SHA256SUMS").read_text() == sha256sums(built)


def test_committed_sha256_of_the_default_models():
    sums = dict(reversed(line.split("  ")) for line in (MODELS_DIR / "SHA256SUMS").read_text().splitlines())
    for name in ("npc-policy-int8.tflite", "npc-policy-int8.npcm", "npc-policy-large-int8.tflite"):
        assert hashlib.sha256((MODELS_DIR / name).read_bytes()).hexdigest() == sums[name]


def test_int8_policy_reads_back_with_its_shapes_and_quantization():
    p = read_int8_policy(model_file("npc-policy-int8"))
    assert p.mlp.widths == (48, 64, 32, 8)
    assert p.action_map is None
    assert [layer.relu for layer in p.mlp.layers] == [True, True, False]
    assert all(layer.w_scale.size == layer.w.shape[0] for layer in p.mlp.layers)  # per-channel
    assert read_int8_policy(model_file("npc-policy-large-int8")).mlp.widths == (48, 256, 256, 128, 8)


def test_v2_has_other_weights_and_the_same_shape():
    v1 = read_int8_policy(model_file("npc-policy-int8")).mlp
    v2 = read_int8_policy(model_file("npc-policy-int8-v2")).mlp
    assert v1.widths == v2.widths
    assert not np.array_equal(v1.layers[0].w, v2.layers[0].w)


def test_int8_reference_tracks_the_float_model():
    mlp, q = policy("npc-policy", 1)
    x = calibration_inputs(48, 200, "test-float-vs-int8")
    probs_q = R.int8_infer(q, R.quantize_input(x, q.in_scale, q.in_zp))
    probs_f = R.float_infer(mlp, x)
    assert np.abs(R.dequantize_probs(probs_q) - probs_f).max() < 0.03
    assert (probs_q.argmax(axis=1) == probs_f.argmax(axis=1)).mean() > 0.9


def test_quantize_multiplier_matches_tflite_definition():
    for real in (0.5, 0.0123, 1.7, 3.1e-5):
        m, shift = quantize_multiplier(real)
        assert (1 << 30) <= m < (1 << 31)
        assert abs(m * 2.0 ** (shift - 31) - real) < real * 1e-9
    assert quantize_multiplier(0.0) == (0, 0)


def test_multiply_by_quantized_multiplier_rounds_like_tflite():
    m, shift = quantize_multiplier(0.25)
    acc = np.array([6, -6, 2, -2, 10, -10])  # 1.5, -1.5, 0.5, -0.5, 2.5, -2.5: ties round away from zero
    assert list(R.multiply_by_quantized_multiplier(acc, m, shift)) == [2, -2, 1, -1, 3, -3]


def test_quantize_input_clips_and_rounds_half_away():
    q = R.quantize_input(np.array([0.0, 1.5, -1.5, 300.0, -300.0]), 1.0, 0)
    assert list(q) == [0, 2, -2, 127, -128]


def test_npcm_round_trip_gives_the_same_inference():
    p = read_int8_policy(model_file("npc-policy-int8"))
    back = npcm.decode(model_file("npc-policy-int8", "npcm").read_bytes())
    x = R.quantize_input(calibration_inputs(48, 64, "npcm-round-trip"), p.mlp.in_scale, p.mlp.in_zp)
    assert np.array_equal(R.int8_infer(p.mlp, x), R.int8_infer(back.mlp, x))


def test_npcm_refuses_broken_files_with_the_reason():
    with pytest.raises(ConfigError, match=r"layer \d needs \d+ bytes"):
        npcm.decode(model_file("npc-fault-broken-int8", "npcm").read_bytes(), "broken.npcm")
    with pytest.raises(ConfigError, match=r"not an \.npcm"):
        npcm.decode(b"TFL3" + b"\0" * 40)
    with pytest.raises(ConfigError, match="trailing"):
        npcm.decode(model_file("npc-policy-int8", "npcm").read_bytes() + b"\0\0\0\0")


def test_converter_refuses_a_tflite_it_cannot_represent():
    with pytest.raises(ConfigError, match=r"fc0/weights: 1000 bytes"):
        npcm.convert(model_file("npc-fault-broken-int8"))
    with pytest.raises(ConfigError, match=r"float32|not int8"):
        npcm.convert(model_file("npc-policy-f32"))


def test_crash_fixture_fails_in_the_reference_at_inference():
    p = npcm.decode(model_file("npc-fault-crash-int8", "npcm").read_bytes())
    x = np.zeros((1, 48), dtype=np.int8)
    with pytest.raises(IndexError):
        R.policy_infer(p.mlp, p.action_map, x)


def test_oversize_fixture_exceeds_an_esp32c6_heap():
    data = model_file("npc-fault-oversize-int8", "npcm").read_bytes()
    weights = sum(a * b for a, b in itertools.pairwise(OVERSIZE_LAYERS))
    assert len(data) > weights > 300 * 1024
    assert npcm.decode(data).mlp.widths == OVERSIZE_LAYERS


def test_unknown_model_name_is_a_config_error_listing_the_known_ones():
    with pytest.raises(ConfigError, match=r"npc-policy-int8\.npcm"):
        model_file("no-such-model", "npcm")


def test_kind_model_picks_the_file_and_format_each_kind_runs():
    from bench.config.kinds import Pi5Settings
    from bench.models import fixture_manifest, kind_model

    path, fmt = kind_model("esp32c6")
    assert (path.name, fmt) == ("npc-policy-int8.npcm", "npcm-int8")
    assert kind_model("jetson-orin-nx")[0].name == "npc-policy-large-int8.tflite"
    assert kind_model("pi5", Pi5Settings(model="npc-policy-int8-v2"))[0].name == "npc-policy-int8-v2.tflite"
    with pytest.raises(ConfigError, match="model_format"):
        kind_model("pi5", Pi5Settings(model_format="onnx"))
    manifest = fixture_manifest(model_file("npc-policy-int8-v2", "npcm"), "npcm-int8")
    assert manifest["version"] == 2 and manifest["size"] == 6376 and manifest["format"] == "npcm-int8"

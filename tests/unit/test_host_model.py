"""The host agent's model wrapper: TFLite's input quantization exactly, read-only weights, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "fixtures" / "models" / "npc-policy-int8.tflite"


@pytest.fixture
def model():
    from npc_models import Model, runtime

    interpreter_cls, _ = runtime()
    return Model(MODEL.read_bytes(), {"name": "npc-policy", "version": 1, "format": "tflite-int8"}, interpreter_cls)


def test_input_quantization_matches_the_reference_on_ties(model):
    from bench.testkit.reference import quantize_input

    scale, zp = model.in_scale, model.in_zp
    ties = (np.arange(48) - 24 + 0.5) * scale  # exactly half a step: rounding direction matters
    for x in (ties, -ties, np.linspace(-1.2, 1.2, 48), np.zeros(48)):
        model.infer(x)
        got = model.interp.get_tensor(model.in_index).reshape(-1)
        np.testing.assert_array_equal(got, quantize_input(x, scale, zp))


def test_weights_are_read_only(model):
    with pytest.raises(ValueError):
        model.weights[0] = 1
    assert isinstance(model.data, bytes)


def test_wrong_format_and_shape_are_refused():
    from npc_models import Model, runtime
    from npc_verify import Refused

    interpreter_cls, _ = runtime()
    with pytest.raises(Refused, match=r"not a \.tflite"):
        Model(MODEL.read_bytes(), {"format": "npcm-int8"}, interpreter_cls)
    with pytest.raises(Refused, match="no tflite runtime"):
        Model(MODEL.read_bytes(), {"format": "tflite-int8"}, None)


def test_probabilities_are_bit_for_bit_those_of_a_plain_invoke(model):
    """The per-frame path reuses its buffers; what it returns equals a fresh quantize + invoke + dequantize."""
    from bench.testkit.reference import quantize_input

    rng = np.random.default_rng(7)
    inp, out = model.interp.get_input_details()[0], model.interp.get_output_details()[0]
    out_scale, out_zp = out["quantization"]
    for x in rng.uniform(-1.3, 1.3, size=(300, 48)):
        got = model.infer(list(x))
        model.interp.set_tensor(inp["index"], quantize_input(x, model.in_scale, model.in_zp).reshape(1, 48))
        model.interp.invoke()
        want = (model.interp.get_tensor(out["index"]).reshape(-1).astype(np.float64) - out_zp) * out_scale
        assert got.tobytes() == want.tobytes()

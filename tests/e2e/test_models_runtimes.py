"""Every fixture .tflite through the real runtimes (ai-edge-litert, tflite-micro) against the numpy reference."""

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from bench.config.kinds import KINDS
from bench.models import model_file
from bench.models.catalogue import policy
from bench.models.policy import calibration_inputs
from bench.models.tflite_read import read_int8_policy
from bench.testkit import reference as R

pytestmark = pytest.mark.e2e
INPUTS = calibration_inputs(48, 100, "runtime-check")


def litert_outputs(name: str, batch: np.ndarray) -> np.ndarray:
    it = Interpreter(model_path=str(model_file(name)), num_threads=1)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for row in batch:
        it.set_tensor(inp["index"], row[None].astype(inp["dtype"]))
        it.invoke()
        rows.append(it.get_tensor(out["index"])[0].copy())
    return np.array(rows)


def tflite_micro_outputs(name: str, x_q: np.ndarray) -> np.ndarray:
    """The int8 outputs of fixture model `name` for each row of `x_q` through tflite-micro."""
    from tflite_micro import runtime

    it = runtime.Interpreter.from_file(str(model_file(name)))
    rows = []
    for row in x_q:
        it.set_input(row[None], 0)
        it.invoke()
        rows.append(it.get_output(0)[0].copy())
    return np.array(rows).astype(int)


@pytest.mark.parametrize("name", ["npc-policy", "npc-policy-large"])
def test_float_models_match_the_reference(name):
    mlp, _ = policy(name, 1)
    got = litert_outputs(f"{name}-f32", INPUTS.astype(np.float32))
    assert np.abs(got - R.float_infer(mlp, INPUTS)).max() < 1e-5


@pytest.mark.parametrize("name", ["npc-policy-int8", "npc-policy-int8-v2", "npc-policy-large-int8"])
def test_int8_models_match_the_reference_within_one_step(name):
    p = read_int8_policy(model_file(name))
    x_q = R.quantize_input(INPUTS, p.mlp.in_scale, p.mlp.in_zp)
    got = litert_outputs(name, x_q).astype(int)
    assert np.abs(got - R.int8_infer(p.mlp, x_q, rounding="single")).max() <= 1
    assert np.abs(got - R.int8_infer(p.mlp, x_q)).max() <= 2  # tflite-micro's double rounding drifts a step more


@pytest.mark.parametrize("name", ["npc-policy-int8", "npc-policy-int8-v2", "npc-policy-large-int8"])
def test_tflite_micro_matches_the_reference_within_one_step(name):
    p = read_int8_policy(model_file(name))
    x_q = R.quantize_input(INPUTS, p.mlp.in_scale, p.mlp.in_zp)
    assert np.abs(tflite_micro_outputs(name, x_q) - R.int8_infer(p.mlp, x_q)).max() <= 1  # bit-exact in practice


def test_kind_default_models_exist():
    for kind in KINDS.values():
        assert model_file(kind.defaults().model).is_file()
    assert model_file(KINDS["esp32c6"].defaults().model, "npcm").is_file()


def test_crash_fixture_loads_then_fails_at_invoke_in_both_runtimes():
    from tflite_micro import runtime

    it = Interpreter(model_path=str(model_file("npc-fault-crash-int8")), num_threads=1)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros((1, 48), np.int8))
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
        it.invoke()
    micro = runtime.Interpreter.from_file(str(model_file("npc-fault-crash-int8")))
    micro.set_input(np.zeros((1, 48), np.int8), 0)
    with pytest.raises(RuntimeError):
        micro.invoke()


def test_broken_fixture_is_refused_when_loading():
    with pytest.raises(ValueError, match="invalidly specified"):
        Interpreter(model_path=str(model_file("npc-fault-broken-int8")), num_threads=1)


def test_arena_fixture_needs_more_than_any_memory_limit_without_allocating():
    it = Interpreter(model_path=str(model_file("npc-fault-arena-int8")), num_threads=1)
    activations = sum(
        int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
        for t in it.get_tensor_details()
        if t["name"] in ("features", "fc0/out", "fc1/out", "logits", "actions")
    )
    limit = max(getattr(k.defaults(), "memory_limit_mb", 0) for k in KINDS.values()) * 1024 * 1024
    assert activations > limit

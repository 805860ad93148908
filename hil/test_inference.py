"""Inference on the device matches the reference on fixture inputs: int8 bit-exact against the runtime whose
arithmetic the agent runs (tflite-micro for MicroPython's kernels, the bench's ai-edge-litert for TFLite
agents of the same build; another TFLite build within one quantisation step), float32 within 1e-5 of the
float reference."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import ai_edge_litert
import numpy as np
import pytest

from bench.bundles import MODELS_DIR
from bench.models.catalogue import policy
from bench.models.policy import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT, calibration_inputs
from bench.models.tflite_read import read_int8_policy
from bench.testkit.reference import float_infer, quantize_input

SAMPLES = 16


@cache
def fixture_by_sha() -> dict[str, Path]:
    """sha256 -> fixture model file (.tflite and .npcm)."""
    files = [*MODELS_DIR.glob("*.tflite"), *MODELS_DIR.glob("*.npcm")]
    return {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in files}


def running_tflite(agent) -> Path:
    """The .tflite of the model the agent runs (an .npcm is converted from the .tflite of the same name)."""
    sha = agent.hello()["model"]["sha256"]
    path = fixture_by_sha().get(sha)
    if path is None:
        pytest.skip(f"device {agent.name}: runs a model that is not a fixture (sha256 {sha[:12]}): no reference")
    return path.with_suffix(".tflite")


REFERENCE_RUNTIME = "ai-edge-litert " + getattr(ai_edge_litert, "__version__", "?")  # as the host agent names it


def reference_int8(model: Path, x_q: np.ndarray, runtime: str) -> np.ndarray:
    """int8 outputs of `model` for int8 inputs, from the reference runtime matching the agent's arithmetic."""
    if "npcnn" in runtime:  # MicroPython's kernels implement tflite-micro's (double rounding) arithmetic
        micro = pytest.importorskip("tflite_micro", reason="pip install tflite-micro (the int8 reference)").runtime
        it = micro.Interpreter.from_file(str(model))
        rows = []
        for row in x_q:
            it.set_input(row[None], 0)
            it.invoke()
            rows.append(it.get_output(0)[0].copy())
        return np.array(rows)
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(model), num_threads=1)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    rows = []
    for row in x_q:
        it.set_tensor(inp["index"], row[None])
        it.invoke()
        rows.append(it.get_tensor(out["index"])[0].copy())
    return np.array(rows)


def test_int8_inference_is_bit_exact(agent, record_measurement):
    model = running_tflite(agent)
    policy = read_int8_policy(model)
    x_q = quantize_input(calibration_inputs(48, SAMPLES, "hil-inference"), policy.mlp.in_scale, policy.mlp.in_zp)
    x = (x_q.astype(np.float64) - policy.mlp.in_zp) * policy.mlp.in_scale  # on the grid: no rounding ties
    runtime = agent.hello()["runtime"]
    want = reference_int8(model, x_q, runtime).astype(int)
    got, micros = [], []
    for row in x:
        res = agent.infer(list(row))
        got.append(np.rint(np.asarray(res["y"]) / SOFTMAX_SCALE + SOFTMAX_ZERO_POINT).astype(int))
        micros.append(res["us"])
    got = np.array(got)
    record_measurement("infer_time_median", float(np.median(micros)), "us", samples=micros)
    differ, steps = int((got != want).sum()), int(np.abs(got - want).max())
    record_measurement("int8_outputs_differing", differ, "count")
    record_measurement("int8_max_steps_off", steps, "count")
    # Bit-exact where the reference is the same arithmetic: tflite-micro for the MicroPython kernels, the same
    # TFLite build for a host agent. Another TFLite build (e.g. tflite-runtime's aarch64 kernels on a Jetson)
    # rounds some products differently: one quantisation step is the most it may be off.
    allowed = 0 if "npcnn" in runtime or runtime == REFERENCE_RUNTIME else 1
    assert steps <= allowed, (
        f"device {agent.name} ({runtime}): {differ} of {want.size} int8 outputs differ from the reference "
        f"({REFERENCE_RUNTIME if allowed else 'same arithmetic'}), max {steps} steps (allowed {allowed}) "
        f"on {model.name}"
    )


def test_float32_inference_within_1e5(agent, record_measurement):
    if "float32" not in agent.hello().get("caps", []):
        pytest.skip(f"device {agent.name}: the agent runs no float32 models")
    agent.load_model(MODELS_DIR / "npc-policy-f32.tflite")  # the next test gets the deployed model back
    xs = calibration_inputs(48, SAMPLES, "hil-float")
    want = float_infer(policy("npc-policy", 1)[0], xs)
    got = np.array([agent.infer(list(map(float, x)))["y"] for x in xs])
    error = float(np.abs(got - want).max())
    record_measurement("float32_max_abs_error", error, "1")
    assert error <= 1e-5, f"device {agent.name}: float32 outputs off by {error:.3g} (limit 1e-5)"

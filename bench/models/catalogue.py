"""Every fixture model file, built from scratch: the policies, their .npcm forms, and the fault fixtures.

`build_all()` is pure and deterministic; `fixtures/models/generate.py` writes its result to disk and
the tests compare it with the committed files and `SHA256SUMS`.
"""

from __future__ import annotations

import hashlib

import numpy as np

from bench.models import INT8_ONLY, POLICY_LAYERS, npcm
from bench.models.policy import (
    SOFTMAX_SCALE,
    SOFTMAX_ZERO_POINT,
    FloatMLP,
    QuantMLP,
    calibration_inputs,
    make_policy,
    quantize_policy,
)
from bench.models.tflite_build import OpSpec, TensorSpec, float_graph, gather_options, int8_graph, serialize
from bench.models.tflite_read import Int8Policy

ARENA_FAULT_BATCH = 1 << 23  # activations of ~1.3 GB: above every kind's memory_limit_mb
OVERSIZE_LAYERS = (48, 640, 448, 8)  # ~320 KB of int8 weights: more than an ESP32-C6's ~300 KB heap
# ~81 KB of int8 weights in blocks of at most 12.5 KB: it parses on a fragmented ESP32-C6 heap (the large
# policy needs one 64 KB block, which a long-running heap may not have), but beside the running model
# (~100 KB of live heap with the agent) it is over the 160 KB live limit
HEAP_FAULT_LAYERS = (48, 112, 112, 112, 112, 112, 112, 112, 8)
CRASH_ACTION_MAP = (0, 1, 2, 3, 4, 5, 6, 99)  # index 99 of 8 actions: the runtimes fail at invoke
BROKEN_WEIGHT_BYTES = 1000  # fc0's weights cut to 1000 of their 3072 bytes


def seed(name: str, version: int) -> str:
    """The weight-stream label of a model version."""
    return f"{name}/v{version}"


def policy(name: str, version: int) -> tuple[FloatMLP, QuantMLP]:
    """The float policy `name` at `version` and its int8 quantization."""
    widths = POLICY_LAYERS[name]
    mlp = make_policy(widths, seed(name, version))
    return mlp, quantize_policy(mlp, calibration_inputs(widths[0]))


def _crash_tflite(q: QuantMLP) -> bytes:
    g = int8_graph(q)
    probs = g.outputs[0]
    order = g.tensor(
        TensorSpec("action_map", (len(CRASH_ACTION_MAP),), np.int32, np.array(CRASH_ACTION_MAP, "<i4").tobytes())
    )
    out = g.tensor(
        TensorSpec("actions_mapped", (1, len(CRASH_ACTION_MAP)), np.int8, None, [SOFTMAX_SCALE], [SOFTMAX_ZERO_POINT])
    )
    g.op(OpSpec(("gather", "int8"), [probs, order], [out], gather_options))
    g.outputs = [out]
    return serialize(g, "FAULT: action map index 99 of 8: GATHER fails at invoke")


def _broken_tflite(q: QuantMLP) -> bytes:
    g = int8_graph(q)
    weights = next(t for t in g.tensors if t.name == "fc0/weights")
    weights.data = weights.data[:BROKEN_WEIGHT_BYTES]
    return serialize(g, "FAULT: fc0 weights truncated: the interpreter refuses the model")


def build_all() -> dict[str, bytes]:
    """File name -> bytes for every fixture model."""
    files: dict[str, bytes] = {}
    for name in POLICY_LAYERS:
        mlp, q = policy(name, 1)
        if name not in INT8_ONLY:
            files[f"{name}-f32.tflite"] = serialize(float_graph(mlp), f"{name} v1 float32")
        files[f"{name}-int8.tflite"] = serialize(int8_graph(q), f"{name} v1 int8")
    _, q1 = policy("npc-policy", 1)
    _, q2 = policy("npc-policy", 2)
    files["npc-policy-int8-v2.tflite"] = serialize(int8_graph(q2), "npc-policy v2 int8")
    files["npc-fault-crash-int8.tflite"] = _crash_tflite(q1)
    for name in ("npc-policy-int8", "npc-policy-int8-v2", "npc-policy-large-int8", "npc-policy-63k-int8",
                 "npc-fault-crash-int8"):  # fmt: skip
        files[f"{name}.npcm"] = npcm.convert_bytes(files[f"{name}.tflite"], f"{name}.tflite")
    files["npc-fault-broken-int8.tflite"] = _broken_tflite(q1)
    good = files["npc-policy-int8.npcm"]
    files["npc-fault-broken-int8.npcm"] = good[: len(good) - 2048]
    files["npc-fault-arena-int8.tflite"] = serialize(int8_graph(q1, batch=ARENA_FAULT_BATCH), "FAULT: 1.3 GB arena")
    oversize = make_policy(OVERSIZE_LAYERS, "npc-fault-oversize/v1")
    files["npc-fault-oversize-int8.npcm"] = npcm.encode(
        Int8Policy(quantize_policy(oversize, calibration_inputs(OVERSIZE_LAYERS[0])), None)
    )
    heap = make_policy(HEAP_FAULT_LAYERS, "npc-fault-heap/v1")
    files["npc-fault-heap-int8.npcm"] = npcm.encode(
        Int8Policy(quantize_policy(heap, calibration_inputs(HEAP_FAULT_LAYERS[0])), None)
    )
    return files


def sha256sums(files: dict[str, bytes]) -> str:
    """`sha256sum`-format text for `files`, sorted by name."""
    return "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n" for n in sorted(files))

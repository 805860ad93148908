"""Numpy reference inference for the policy models: float64/float32 and TFLite-exact int8 arithmetic.

The int8 path reproduces TFLite's integer kernels for FULLY_CONNECTED (per-channel
MultiplyByQuantizedMultiplier): `rounding="double"` is tflite-micro's (and the .npcm runtime's)
arithmetic, bit-exact; `rounding="single"` is ai-edge-litert's (built with TFLITE_SINGLE_ROUNDING),
which differs from "double" by one step in about 1% of hidden values. Softmax is computed in float from the
dequantized logits and requantized to (1/256, -128), which stays within one step of the runtimes'
fixed-point softmax kernels.
"""

from __future__ import annotations

import numpy as np

from bench.models.policy import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT, FloatMLP, QuantMLP


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax."""
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def float_infer(mlp: FloatMLP, x: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Action probabilities (batch, actions) of the float model, computed in `dtype`."""
    h = np.asarray(x, dtype=dtype)
    for layer in mlp.layers:
        h = h @ layer.w.T.astype(dtype) + layer.b.astype(dtype)
        if layer.relu:
            h = np.maximum(h, 0)
    return softmax(h)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (C's round, as TFLite uses)."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_input(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float features -> int8: clip(round(x / scale) + zp, -128, 127)."""
    return np.clip(round_half_away(np.asarray(x, dtype=np.float64) / scale) + zero_point, -128, 127).astype(np.int8)


def multiply_by_quantized_multiplier(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding), element-wise on int64 arrays."""
    acc = acc.astype(np.int64)
    multiplier = np.broadcast_to(multiplier, acc.shape).astype(np.int64)
    shift = np.broadcast_to(shift, acc.shape).astype(np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    ab = (acc << left) * multiplier
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    high = np.where(total >= 0, total >> 31, -((-total) >> 31))  # division truncating toward zero
    mask = (np.int64(1) << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


def multiply_by_quantized_multiplier_single(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier under TFLITE_SINGLE_ROUNDING (one rounding shift)."""
    acc = acc.astype(np.int64)
    total_shift = 31 - np.broadcast_to(shift, acc.shape).astype(np.int64)
    product = acc * np.broadcast_to(multiplier, acc.shape).astype(np.int64)
    return (product + (np.int64(1) << (total_shift - 1))) >> total_shift


REQUANTIZE = {"double": multiply_by_quantized_multiplier, "single": multiply_by_quantized_multiplier_single}


def int8_logits(mlp: QuantMLP, x_q: np.ndarray, rounding: str = "double") -> np.ndarray:
    """int8 logits (batch, actions) from int8 inputs (batch, features); `rounding` picks the runtime's."""
    requantize = REQUANTIZE[rounding]
    h = np.asarray(x_q, dtype=np.int64)
    for layer in mlp.layers:
        acc = (h - layer.in_zp) @ layer.w.T.astype(np.int64) + layer.b.astype(np.int64)
        out = requantize(acc, layer.multiplier, layer.shift) + layer.out_zp
        low = max(layer.out_zp, -128) if layer.relu else -128
        h = np.clip(out, low, 127)
    return h.astype(np.int8)


def int8_softmax(logits_q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """int8 softmax output at (1/256, -128) from int8 logits at (scale, zero_point)."""
    p = softmax((np.asarray(logits_q, dtype=np.float64) - zero_point) * scale)
    return np.clip(round_half_away(p / SOFTMAX_SCALE) + SOFTMAX_ZERO_POINT, -128, 127).astype(np.int8)


def int8_infer(mlp: QuantMLP, x_q: np.ndarray, rounding: str = "double") -> np.ndarray:
    """int8 action probabilities (batch, actions) at (1/256, -128) from int8 inputs."""
    last = mlp.layers[-1]
    return int8_softmax(int8_logits(mlp, x_q, rounding), last.out_scale, last.out_zp)


def dequantize_probs(probs_q: np.ndarray) -> np.ndarray:
    """int8 softmax output -> probabilities."""
    return (np.asarray(probs_q, dtype=np.float64) - SOFTMAX_ZERO_POINT) * SOFTMAX_SCALE


def policy_infer(mlp: QuantMLP, action_map: tuple[int, ...] | None, x_q: np.ndarray) -> np.ndarray:
    """int8 action probabilities including the optional action remap (a GATHER; IndexError when out of range)."""
    probs = int8_infer(mlp, x_q)
    return probs if action_map is None else probs[:, list(action_map)]

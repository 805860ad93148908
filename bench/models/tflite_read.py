"""Read an int8 policy .tflite back into its quantized layers (for the .npcm converter and the reference).

Accepts exactly the graph shape the policy uses: int8 FULLY_CONNECTED layers (constant per-channel
weights and int32 biases, fused NONE/RELU), then SOFTMAX, then optionally a GATHER along the action
axis with constant indices (an action remap). Anything else is refused with a message naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tflite

from bench.core.errors import ConfigError
from bench.core.inputs import read_input
from bench.models.policy import QuantLayer, QuantMLP, quant_layer

_NP = {tflite.TensorType.INT8: np.int8, tflite.TensorType.INT32: np.int32, tflite.TensorType.FLOAT32: np.float32}


@dataclass(frozen=True)
class Int8Policy:
    """An int8 policy read from a .tflite: its layers, and the action remap (None when there is none)."""

    mlp: QuantMLP
    action_map: tuple[int, ...] | None


class _Reader:
    def __init__(self, data: bytes, path: str) -> None:
        self.path = path
        if len(data) < 8 or data[4:8] != b"TFL3":
            raise ConfigError(f"model {path}: not a .tflite file (no TFL3 identifier)")
        self.model = tflite.Model.GetRootAsModel(data, 0)
        if self.model.SubgraphsLength() != 1:
            self.fail("expected exactly one subgraph")
        self.graph = self.model.Subgraphs(0)

    def fail(self, what: str) -> None:
        raise ConfigError(f"model {self.path}: {what}", hint="only int8 FC/softmax policy models convert to .npcm")

    def opcode(self, op: tflite.Operator) -> int:
        return self.model.OperatorCodes(op.OpcodeIndex()).BuiltinCode()

    def tensor(self, index: int) -> tflite.Tensor:
        return self.graph.Tensors(index)

    def constant(self, index: int) -> np.ndarray:
        t = self.tensor(index)
        buf = self.model.Buffers(t.Buffer())
        if buf.DataLength() == 0:
            self.fail(f"tensor {t.Name().decode()} has no constant data")
        dtype = _NP.get(t.Type())
        if dtype is None:
            self.fail(f"tensor {t.Name().decode()} has an unsupported type {t.Type()}")
        shape = tuple(int(s) for s in t.ShapeAsNumpy())
        raw = buf.DataAsNumpy().tobytes()
        expected = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if len(raw) != expected:
            self.fail(
                f"tensor {t.Name().decode()}: {len(raw)} bytes of data for shape {list(shape)} ({expected} needed)"
            )
        return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)

    def quant(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        t = self.tensor(index)
        q = t.Quantization()
        if q is None or q.ScaleLength() == 0:
            self.fail(f"tensor {t.Name().decode()} is not quantized")
        return q.ScaleAsNumpy().astype(np.float64), q.ZeroPointAsNumpy().astype(np.int64)

    def int8_tensor(self, index: int) -> tuple[float, int]:
        t = self.tensor(index)
        if t.Type() != tflite.TensorType.INT8:
            self.fail(f"tensor {t.Name().decode()} is not int8")
        scales, zps = self.quant(index)
        return float(scales[0]), int(zps[0])

    def fc_relu(self, op: tflite.Operator) -> bool:
        table = op.BuiltinOptions()
        if table is None:
            return False
        options = tflite.FullyConnectedOptions()
        options.Init(table.Bytes, table.Pos)
        act = options.FusedActivationFunction()
        if act not in (tflite.ActivationFunctionType.NONE, tflite.ActivationFunctionType.RELU):
            self.fail(f"unsupported fused activation {act}")
        return act == tflite.ActivationFunctionType.RELU


def read_int8_policy(path: Path) -> Int8Policy:
    """The int8 policy in the .tflite file at `path`, or a ConfigError saying what does not fit."""
    data = read_input(path, "model")
    return parse_int8_policy(data, str(path))


def parse_int8_policy(data: bytes, source: str = "<bytes>") -> Int8Policy:
    """The int8 policy in .tflite bytes (`source` names them in errors)."""
    r = _Reader(data, source)
    ops = [r.graph.Operators(i) for i in range(r.graph.OperatorsLength())]
    layers: list[QuantLayer] = []
    k = 0
    while k < len(ops) and r.opcode(ops[k]) == tflite.BuiltinOperator.FULLY_CONNECTED:
        op = ops[k]
        x, w_idx, b_idx = (op.Inputs(j) for j in range(3))
        in_q = r.int8_tensor(x)
        out_q = r.int8_tensor(op.Outputs(0))
        w = r.constant(w_idx).astype(np.int8)
        b = r.constant(b_idx).astype(np.int32)
        w_scale, _ = r.quant(w_idx)
        if w_scale.size == 1:
            w_scale = np.full(w.shape[0], w_scale[0])
        if w.ndim != 2 or b.shape != (w.shape[0],) or w_scale.size != w.shape[0]:
            r.fail(f"layer {len(layers)}: weights {w.shape}, bias {b.shape} and {w_scale.size} scales do not agree")
        if layers and layers[-1].w.shape[0] != w.shape[1]:
            r.fail(
                f"layer {len(layers)}: takes {w.shape[1]} inputs but the previous layer gives {layers[-1].w.shape[0]}"
            )
        layers.append(quant_layer(w, w_scale, b, in_q, out_q, r.fc_relu(op)))
        k += 1
    if not layers:
        r.fail("no int8 FULLY_CONNECTED layers")
    if k >= len(ops) or r.opcode(ops[k]) != tflite.BuiltinOperator.SOFTMAX:
        r.fail("the FC layers must be followed by SOFTMAX")
    k += 1
    action_map = None
    if k < len(ops) and r.opcode(ops[k]) == tflite.BuiltinOperator.GATHER:
        action_map = tuple(int(v) for v in r.constant(ops[k].Inputs(1)).ravel())
        k += 1
    if k != len(ops):
        r.fail(f"unexpected operator {r.opcode(ops[k])} after the softmax")
    return Int8Policy(QuantMLP(tuple(layers)), action_map)

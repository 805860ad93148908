"""Write .tflite flatbuffers without TensorFlow: a small graph builder plus the policy MLP graphs.

Uses the generated `tflite` schema code (its builder functions) and `flatbuffers`. Buffer data is
16-byte aligned, buffer 0 is the empty sentinel buffer, as TensorFlow's converter does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

from bench.models.policy import SOFTMAX_SCALE, SOFTMAX_ZERO_POINT, FloatMLP, QuantMLP

SCHEMA_VERSION = 3
DTYPES = {np.float32: tflite.TensorType.FLOAT32, np.int8: tflite.TensorType.INT8, np.int32: tflite.TensorType.INT32}
# (builtin code, version) as TensorFlow's converter stamps them for these ops and types.
OP_VERSIONS = {
    ("fc", "float32"): (tflite.BuiltinOperator.FULLY_CONNECTED, 1),
    ("fc", "int8"): (tflite.BuiltinOperator.FULLY_CONNECTED, 4),
    ("softmax", "float32"): (tflite.BuiltinOperator.SOFTMAX, 1),
    ("softmax", "int8"): (tflite.BuiltinOperator.SOFTMAX, 2),
    ("gather", "int8"): (tflite.BuiltinOperator.GATHER, 2),
}
OptionsWriter = Callable[[flatbuffers.Builder], tuple[int, int]]


@dataclass
class TensorSpec:
    """A tensor: shape, numpy dtype, constant data (or None), and int8 quantization (scales, zero points)."""

    name: str
    shape: tuple[int, ...]
    dtype: type
    data: bytes | None = None
    scales: Sequence[float] | None = None
    zero_points: Sequence[int] | None = None
    quantized_dimension: int = 0


@dataclass
class OpSpec:
    """An operator: key into OP_VERSIONS, tensor indices, and a writer for its builtin options."""

    kind: tuple[str, str]
    inputs: list[int]
    outputs: list[int]
    options: OptionsWriter | None = None


@dataclass
class Graph:
    """A single-subgraph model under construction."""

    tensors: list[TensorSpec] = field(default_factory=list)
    ops: list[OpSpec] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def tensor(self, spec: TensorSpec) -> int:
        """Add a tensor; returns its index."""
        self.tensors.append(spec)
        return len(self.tensors) - 1

    def op(self, spec: OpSpec) -> None:
        """Add an operator (in execution order)."""
        self.ops.append(spec)


def _aligned_bytes(builder: flatbuffers.Builder, data: bytes, alignment: int = 16) -> int:
    builder.StartVector(1, len(data), alignment)
    builder.head -= len(data)
    builder.Bytes[builder.head : builder.head + len(data)] = data
    return builder.EndVector()


def _int_vector(builder: flatbuffers.Builder, values: Sequence[int], dtype: str = "<i4") -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype=dtype))


def _quantization(builder: flatbuffers.Builder, spec: TensorSpec) -> int | None:
    if spec.scales is None:
        return None
    scale = builder.CreateNumpyVector(np.asarray(spec.scales, dtype="<f4"))
    zero_point = builder.CreateNumpyVector(np.asarray(spec.zero_points, dtype="<i8"))
    tflite.QuantizationParametersStart(builder)
    tflite.QuantizationParametersAddScale(builder, scale)
    tflite.QuantizationParametersAddZeroPoint(builder, zero_point)
    tflite.QuantizationParametersAddQuantizedDimension(builder, spec.quantized_dimension)
    return tflite.QuantizationParametersEnd(builder)


def serialize(graph: Graph, description: str) -> bytes:
    """The .tflite bytes of `graph`."""
    builder = flatbuffers.Builder(4096)
    buffer_data = [b""] + [t.data for t in graph.tensors if t.data is not None]
    buffers = []
    for data in buffer_data:
        vec = _aligned_bytes(builder, data) if data else None
        tflite.BufferStart(builder)
        if vec is not None:
            tflite.BufferAddData(builder, vec)
        buffers.append(tflite.BufferEnd(builder))
    tensors = []
    next_buffer = 1
    for spec in graph.tensors:
        name = builder.CreateString(spec.name)
        shape = _int_vector(builder, spec.shape)
        quant = _quantization(builder, spec)
        tflite.TensorStart(builder)
        tflite.TensorAddShape(builder, shape)
        tflite.TensorAddType(builder, DTYPES[spec.dtype])
        if spec.data is not None:
            tflite.TensorAddBuffer(builder, next_buffer)
            next_buffer += 1
        else:
            tflite.TensorAddBuffer(builder, 0)
        tflite.TensorAddName(builder, name)
        if quant is not None:
            tflite.TensorAddQuantization(builder, quant)
        tensors.append(tflite.TensorEnd(builder))
    kinds = list(dict.fromkeys(op.kind for op in graph.ops))
    codes = []
    for kind in kinds:
        code, version = OP_VERSIONS[kind]
        tflite.OperatorCodeStart(builder)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(builder, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(builder, code)
        tflite.OperatorCodeAddVersion(builder, version)
        codes.append(tflite.OperatorCodeEnd(builder))
    operators = []
    for op in graph.ops:
        ins = _int_vector(builder, op.inputs)
        outs = _int_vector(builder, op.outputs)
        options = op.options(builder) if op.options else None
        tflite.OperatorStart(builder)
        tflite.OperatorAddOpcodeIndex(builder, kinds.index(op.kind))
        tflite.OperatorAddInputs(builder, ins)
        tflite.OperatorAddOutputs(builder, outs)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(builder, options[0])
            tflite.OperatorAddBuiltinOptions(builder, options[1])
        operators.append(tflite.OperatorEnd(builder))

    def table_vector(items: list[int]) -> int:
        builder.StartVector(4, len(items), 4)
        for item in reversed(items):
            builder.PrependUOffsetTRelative(item)
        return builder.EndVector()

    tensor_vec = table_vector(tensors)
    op_vec = table_vector(operators)
    sub_inputs = _int_vector(builder, graph.inputs)
    sub_outputs = _int_vector(builder, graph.outputs)
    sub_name = builder.CreateString("main")
    tflite.SubGraphStart(builder)
    tflite.SubGraphAddTensors(builder, tensor_vec)
    tflite.SubGraphAddInputs(builder, sub_inputs)
    tflite.SubGraphAddOutputs(builder, sub_outputs)
    tflite.SubGraphAddOperators(builder, op_vec)
    tflite.SubGraphAddName(builder, sub_name)
    subgraph = tflite.SubGraphEnd(builder)
    subgraph_vec = table_vector([subgraph])
    code_vec = table_vector(codes)
    buffer_vec = table_vector(buffers)
    desc = builder.CreateString(description)
    tflite.ModelStart(builder)
    tflite.ModelAddVersion(builder, SCHEMA_VERSION)
    tflite.ModelAddOperatorCodes(builder, code_vec)
    tflite.ModelAddSubgraphs(builder, subgraph_vec)
    tflite.ModelAddDescription(builder, desc)
    tflite.ModelAddBuffers(builder, buffer_vec)
    builder.Finish(tflite.ModelEnd(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def fc_options(relu: bool) -> OptionsWriter:
    """FULLY_CONNECTED options with the fused activation."""

    def write(builder: flatbuffers.Builder) -> tuple[int, int]:
        tflite.FullyConnectedOptionsStart(builder)
        act = tflite.ActivationFunctionType
        tflite.FullyConnectedOptionsAddFusedActivationFunction(builder, act.RELU if relu else act.NONE)
        return tflite.BuiltinOptions.FullyConnectedOptions, tflite.FullyConnectedOptionsEnd(builder)

    return write


def softmax_options(builder: flatbuffers.Builder) -> tuple[int, int]:
    """SOFTMAX options, beta 1."""
    tflite.SoftmaxOptionsStart(builder)
    tflite.SoftmaxOptionsAddBeta(builder, 1.0)
    return tflite.BuiltinOptions.SoftmaxOptions, tflite.SoftmaxOptionsEnd(builder)


def gather_options(builder: flatbuffers.Builder) -> tuple[int, int]:
    """GATHER options along axis 1."""
    tflite.GatherOptionsStart(builder)
    tflite.GatherOptionsAddAxis(builder, 1)
    return tflite.BuiltinOptions.GatherOptions, tflite.GatherOptionsEnd(builder)


def float_graph(mlp: FloatMLP, batch: int = 1) -> Graph:
    """FC(+RELU) ... FC -> SOFTMAX in float32, input (batch, features), output (batch, actions)."""
    g = Graph()
    x = g.tensor(TensorSpec("features", (batch, mlp.widths[0]), np.float32))
    g.inputs = [x]
    for k, layer in enumerate(mlp.layers):
        w = g.tensor(TensorSpec(f"fc{k}/weights", layer.w.shape, np.float32, layer.w.astype("<f4").tobytes()))
        b = g.tensor(TensorSpec(f"fc{k}/bias", layer.b.shape, np.float32, layer.b.astype("<f4").tobytes()))
        name = "logits" if k == len(mlp.layers) - 1 else f"fc{k}/out"
        y = g.tensor(TensorSpec(name, (batch, layer.w.shape[0]), np.float32))
        g.op(OpSpec(("fc", "float32"), [x, w, b], [y], fc_options(layer.relu)))
        x = y
    probs = g.tensor(TensorSpec("actions", (batch, mlp.widths[-1]), np.float32))
    g.op(OpSpec(("softmax", "float32"), [x], [probs], softmax_options))
    g.outputs = [probs]
    return g


def int8_graph(mlp: QuantMLP, batch: int = 1) -> Graph:
    """The full-integer graph: int8 input, per-channel int8 FCs, int8 softmax output at (1/256, -128)."""
    g = Graph()
    first = mlp.layers[0]
    x = g.tensor(TensorSpec("features", (batch, mlp.widths[0]), np.int8, None, [first.in_scale], [first.in_zp]))
    g.inputs = [x]
    for k, layer in enumerate(mlp.layers):
        n_out = layer.w.shape[0]
        w = g.tensor(
            TensorSpec(f"fc{k}/weights", layer.w.shape, np.int8, layer.w.tobytes(), list(layer.w_scale), [0] * n_out)
        )
        bias_scales = [float(np.float32(layer.in_scale * s)) for s in layer.w_scale]
        b = g.tensor(
            TensorSpec(f"fc{k}/bias", (n_out,), np.int32, layer.b.astype("<i4").tobytes(), bias_scales, [0] * n_out)
        )
        name = "logits" if k == len(mlp.layers) - 1 else f"fc{k}/out"
        y = g.tensor(TensorSpec(name, (batch, n_out), np.int8, None, [layer.out_scale], [layer.out_zp]))
        g.op(OpSpec(("fc", "int8"), [x, w, b], [y], fc_options(layer.relu)))
        x = y
    probs = g.tensor(
        TensorSpec("actions", (batch, mlp.widths[-1]), np.int8, None, [SOFTMAX_SCALE], [SOFTMAX_ZERO_POINT])
    )
    g.op(OpSpec(("softmax", "int8"), [x], [probs], softmax_options))
    g.outputs = [probs]
    return g

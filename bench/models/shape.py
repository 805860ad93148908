"""What a model file must look like before it is signed and published: it parses, and it takes the
feature vector and gives the action scores of the policy format (FEATURES in, ACTIONS out)."""

from __future__ import annotations

from pathlib import Path

import tflite

from bench.core.errors import ConfigError
from bench.core.inputs import read_input
from bench.models import ACTIONS, FEATURES, FORMAT_EXT, npcm


def check_model(path: Path, fmt: str) -> None:
    """ConfigError naming the file when it is not a `fmt` policy model with input [1, FEATURES] and output
    [1, ACTIONS] (a truncated or wrong-shaped file is refused here, not only on the device)."""
    data = read_input(path, "model")
    if FORMAT_EXT.get(fmt) == "npcm":
        policy = npcm.decode(data, str(path))
        shapes = ((1, policy.mlp.layers[0].w.shape[1]), (1, policy.mlp.layers[-1].w.shape[0]))
    else:
        shapes = _tflite_shapes(data, path)
    want = ((1, FEATURES), (1, ACTIONS))
    if shapes != want:
        raise ConfigError(f"model {path}: input/output shapes {shapes}, the policy format needs {want}",
                          hint="see docs/models.md")  # fmt: skip


def _tflite_shapes(data: bytes, path: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ConfigError(f"model {path}: not a .tflite file (no TFL3 identifier)")
    try:  # a flatbuffer cut short or corrupt fails somewhere in these reads
        graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
        inputs = [
            tuple(int(s) for s in graph.Tensors(graph.Inputs(i)).ShapeAsNumpy()) for i in range(graph.InputsLength())
        ]
        outputs = [tuple(int(s) for s in graph.Tensors(graph.Outputs(i)).ShapeAsNumpy())
                   for i in range(graph.OutputsLength())]  # fmt: skip
    except Exception as exc:  # flatbuffers raises IndexError, struct.error, TypeError, ...
        raise ConfigError(f"model {path}: the .tflite file is cut short or corrupt ({type(exc).__name__})") from None
    if len(inputs) != 1 or len(outputs) != 1:
        raise ConfigError(f"model {path}: {len(inputs)} inputs and {len(outputs)} outputs, the policy has 1 and 1")
    return inputs[0], outputs[0]

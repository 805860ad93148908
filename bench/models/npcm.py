"""The compact `.npcm` model format for the microcontroller agent (docs/models.md), converted from int8 .tflite.

Layout (little-endian, every section 4-byte aligned):

    header   "NPCM" | u8 version=1 | u8 layers L | u8 flags | u8 0 | f32 input scale | i32 input zero point
    layers   L x (u16 n_in | u16 n_out | u8 relu | 3 x u8 0 | f32 out scale | i32 out zero point)
    map      (flags bit 1) u8 count A | A x u8 action index | pad
    per layer: i32 bias[n_out] | i32 multiplier[n_out] | i8 shift[n_out] | pad | i8 weights[n_out * n_in] | pad

Flags bit 0: softmax output at scale 1/256, zero point -128 (always set in version 1).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from bench.core.errors import ConfigError
from bench.core.inputs import read_input
from bench.models.policy import QuantLayer, QuantMLP
from bench.models.tflite_read import Int8Policy, parse_int8_policy

MAGIC = b"NPCM"
VERSION = 1
FLAG_SOFTMAX = 1
FLAG_ACTION_MAP = 2
HEADER = struct.Struct("<4sBBBBfi")
LAYER = struct.Struct("<HHB3xfi")


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def encode(policy: Int8Policy) -> bytes:
    """The .npcm bytes of an int8 policy."""
    mlp = policy.mlp
    flags = FLAG_SOFTMAX | (FLAG_ACTION_MAP if policy.action_map is not None else 0)
    out = [HEADER.pack(MAGIC, VERSION, len(mlp.layers), flags, 0, mlp.in_scale, mlp.in_zp)]
    for layer in mlp.layers:
        n_out, n_in = layer.w.shape
        out.append(LAYER.pack(n_in, n_out, int(layer.relu), layer.out_scale, layer.out_zp))
    if policy.action_map is not None:
        out.append(_pad(bytes([len(policy.action_map), *policy.action_map])))
    for layer in mlp.layers:
        out.append(layer.b.astype("<i4").tobytes())
        out.append(layer.multiplier.astype("<i4").tobytes())
        out.append(_pad(layer.shift.astype("i1").tobytes()))
        out.append(_pad(layer.w.astype("i1").tobytes()))
    return b"".join(out)


def convert(tflite_path: Path) -> bytes:
    """Convert an int8 policy .tflite file to .npcm bytes (a ConfigError naming the file if it does not fit)."""
    return convert_bytes(read_input(tflite_path, "model"), str(tflite_path))


def convert_bytes(data: bytes, tflite_path: str = "<bytes>") -> bytes:
    """Convert int8 policy .tflite bytes to .npcm bytes."""
    policy = parse_int8_policy(data, tflite_path)
    for k, layer in enumerate(policy.mlp.layers):
        if max(layer.w.shape) > 0xFFFF:
            raise ConfigError(f"model {tflite_path}: layer {k} is wider than .npcm's 65535 limit")
    if policy.action_map is not None and (
        len(policy.action_map) > 255 or not all(0 <= a < 256 for a in policy.action_map)
    ):
        raise ConfigError(f"model {tflite_path}: the action map does not fit .npcm's u8 entries")
    return encode(policy)


def decode(data: bytes, source: str = "<bytes>") -> Int8Policy:
    """Parse .npcm bytes (checking the structure as the MicroPython runtime does)."""

    def fail(what: str) -> None:
        raise ConfigError(f"model {source}: {what}")

    if len(data) < HEADER.size:
        fail("too short for an .npcm header")
    magic, version, n_layers, flags, _, in_scale, in_zp = HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION:
        fail(f"not an .npcm version {VERSION} file")
    pos = HEADER.size
    dims = []
    for _ in range(n_layers):
        dims.append(LAYER.unpack_from(data, pos))
        pos += LAYER.size
    action_map = None
    if flags & FLAG_ACTION_MAP:
        count = data[pos]
        action_map = tuple(data[pos + 1 : pos + 1 + count])
        pos += 1 + count + (-(1 + count) % 4)
    layers = []
    scale, zp = in_scale, in_zp
    for k, (n_in, n_out, relu, out_scale, out_zp) in enumerate(dims):
        if layers and layers[-1].w.shape[0] != n_in:
            fail(f"layer {k} takes {n_in} inputs but layer {k - 1} gives {layers[-1].w.shape[0]}")
        need = 8 * n_out + n_out + (-n_out % 4) + n_in * n_out + (-(n_in * n_out) % 4)
        if pos + need > len(data):
            fail(f"layer {k} needs {need} bytes at offset {pos}, file has {len(data)}")
        b = np.frombuffer(data, "<i4", n_out, pos)
        m = np.frombuffer(data, "<i4", n_out, pos + 4 * n_out)
        s = np.frombuffer(data, "i1", n_out, pos + 8 * n_out)
        pos += 9 * n_out + (-n_out % 4)
        w = np.frombuffer(data, "i1", n_in * n_out, pos).reshape(n_out, n_in)
        pos += n_in * n_out + (-(n_in * n_out) % 4)
        layers.append(
            QuantLayer(
                w=w.copy(),
                w_scale=np.zeros(n_out),
                b=b.astype(np.int32),
                in_scale=scale,
                in_zp=zp,
                out_scale=out_scale,
                out_zp=out_zp,
                relu=bool(relu),
                multiplier=m.astype(np.int64),
                shift=s.astype(np.int64),
            )
        )
        scale, zp = out_scale, out_zp
    if pos != len(data):
        fail(f"{len(data) - pos} trailing bytes after the last layer")
    return Int8Policy(QuantMLP(tuple(layers)), action_map)

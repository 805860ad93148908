"""int8 inference of .npcm policy models (docs/models.md) in MicroPython (and CPython).

No numpy: weights live in a bytearray (read in place), integers follow TFLite's reference kernels exactly
(per-channel MultiplyByQuantizedMultiplier with double rounding, as tflite-micro), the softmax is
computed in float from the dequantized logits and requantized to (1/256, -128). An optional viper
kernel (`npcnn_viper.py`) does the dot products when the port has the native emitter.
"""

import io
import struct
from array import array
from math import exp

from npcfeat import lsum

try:
    from npcnn_viper import copy32 as _copy32
    from npcnn_viper import fc_acc as _fc_acc_native
except (ImportError, SyntaxError, NameError, AttributeError):  # no native emitter on this port
    _fc_acc_native = None

KERNEL = "python" if _fc_acc_native is None else "viper"  # which dot-product loop this port runs

MAGIC = b"NPCM"
VERSION = 1
FLAG_ACTION_MAP = 2
SOFTMAX_SCALE = 1.0 / 256.0
SOFTMAX_ZERO_POINT = -128
_HEADER = "<4sBBBBfi"
_LAYER = "<HHB3xfi"


class ModelError(ValueError):
    """The bytes are not a valid .npcm model."""


def _pad4(n):
    return n + (-n % 4)


def round_half_away(v):
    """Round to nearest, ties away from zero (C's round)."""
    return int(v + 0.5) if v >= 0 else -int(-v + 0.5)


def requantize(acc, multiplier, shift):
    """TFLite's MultiplyByQuantizedMultiplier (double rounding) on Python ints."""
    if shift > 0:
        acc <<= shift
        right = 0
    else:
        right = -shift
    total = acc * multiplier + ((1 << 30) if acc * multiplier >= 0 else (1 - (1 << 30)))
    high = total >> 31 if total >= 0 else -((-total) >> 31)
    if right:
        mask = (1 << right) - 1
        threshold = (mask >> 1) + (1 if high < 0 else 0)
        high = (high >> right) + (1 if (high & mask) > threshold else 0)
    return high


class Layer:
    """One int8 fully connected layer: weights row-major (out, in) as two's complement bytes in a bytearray,
    per-channel requantization."""

    __slots__ = ("bias", "in_zp", "mult", "n_in", "n_out", "out_scale", "out_zp", "relu", "shift", "w")

    def __init__(self, n_in, n_out, relu, in_zp, out_scale, out_zp):
        self.n_in = n_in
        self.n_out = n_out
        self.relu = relu
        self.in_zp = in_zp
        self.out_scale = out_scale
        self.out_zp = out_zp
        self.bias = None
        self.mult = None
        self.shift = None
        self.w = None


def shapes(model):
    """The (inputs, outputs) of each layer of `model`: models with equal shapes can share arrays."""
    return tuple((layer.n_in, layer.n_out) for layer in getattr(model, "layers", ()))


class Buffers:
    """Arrays kept for the next model of the same shapes to be read into. A heap fragmented by hours of
    inputs can hold many kB free yet no contiguous block for a layer's weights (a 3 KB allocation failed with
    170 KB free); reading into arrays that already exist needs none."""

    def __init__(self, model_shapes):
        self.shapes = model_shapes
        self.nbytes = 0  # of the arrays kept
        self._free = {}

    @classmethod
    def of(cls, model):
        """The arrays of `model`, a model nothing runs any more."""
        pool = cls(shapes(model))
        for layer in getattr(model, "layers", ()):
            pool.put("i", layer.bias)
            pool.put("i", layer.mult)
            pool.put("b", layer.shift)
            pool.put("w", layer.w)
        if getattr(model, "_acc", None) is not None:
            pool.put("i", model._acc)
        return pool

    @classmethod
    def like(cls, model):
        """New arrays of `model`'s shapes (allocated while the heap is young: at the agent's first model)."""
        pool = cls(shapes(model))
        for n_in, n_out in pool.shapes:
            pool.put("i", array("i", bytes(4 * n_out)))
            pool.put("i", array("i", bytes(4 * n_out)))
            pool.put("b", array("b", bytes(n_out)))
            pool.put("w", bytearray(n_in * n_out))
        if pool.shapes:
            width = max(n_out for _, n_out in pool.shapes)
            pool.put("i", array("i", bytes(4 * width)))
        return pool

    def put(self, kind, buf):
        """Keep `buf` ("i": int32 array, "b": int8 array, "w": weights bytearray)."""
        self._free.setdefault((kind, len(buf)), []).append(buf)
        self.nbytes += len(buf) * (4 if kind == "i" else 1)

    def take(self, kind, count):
        """A kept array of `count` items, or None."""
        kept = self._free.get((kind, count))
        if not kept:
            return None
        self.nbytes -= count * (4 if kind == "i" else 1)
        return kept.pop()

    def count(self):
        """How many arrays are kept."""
        return sum(len(v) for v in self._free.values())


class Model:
    """A parsed .npcm model. Weights are read-only once loaded; `infer` allocates no model state.

    `source` is the model's bytes or a binary file opened for reading; from a file, each section is
    read straight into its array, so loading needs little more RAM than the model itself."""

    def __init__(self, source, native=True, reuse=None):
        self._native = _fc_acc_native if native else None
        self._reuse = reuse  # a Buffers whose arrays this model's are read into when sizes match
        f = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
        self.file_bytes = 0
        head = self._read(f, 16)
        magic, version, n_layers, flags, _, in_scale, in_zp = struct.unpack(_HEADER, head)
        if magic != MAGIC or version != VERSION:
            raise ModelError("not an .npcm version %d file" % VERSION)
        if n_layers < 1:
            raise ModelError("no layers")
        self.in_scale = in_scale
        self.in_zp = in_zp
        layers = []
        zp = in_zp
        for k in range(n_layers):
            n_in, n_out, relu, out_scale, out_zp = struct.unpack(_LAYER, self._read(f, 16))
            if layers and layers[-1].n_out != n_in:
                raise ModelError("layer %d takes %d inputs but layer %d gives %d" % (k, n_in, k - 1, layers[-1].n_out))
            if n_in < 1 or n_out < 1:
                raise ModelError("layer %d has an empty dimension" % k)
            layers.append(Layer(n_in, n_out, bool(relu), zp, out_scale, out_zp))
            zp = out_zp
        self.action_map = None
        if flags & FLAG_ACTION_MAP:
            count = self._read(f, 1)[0]
            self.action_map = self._read(f, count)
            self._read(f, _pad4(1 + count) - 1 - count)
        for k, layer in enumerate(layers):
            n_out = layer.n_out
            try:
                layer.bias = self._array(f, "i", n_out)
                layer.mult = self._array(f, "i", n_out)
                layer.shift = self._array(f, "b", n_out)
                self._read(f, _pad4(n_out) - n_out)
                layer.w = self._weights(f, n_out * layer.n_in)
                self._read(f, _pad4(n_out * layer.n_in) - n_out * layer.n_in)
            except ModelError as exc:
                raise ModelError("layer %d: %s" % (k, exc))
        if f.read(1):
            raise ModelError("trailing bytes after the last layer (at offset %d)" % self.file_bytes)
        self.layers = tuple(layers)
        self.n_features = layers[0].n_in
        self.n_actions = layers[-1].n_out if self.action_map is None else len(self.action_map)
        self.weight_bytes = sum(len(x.w) + 9 * x.n_out for x in layers)
        width = max(x.n_out for x in layers)
        self._acc = self._take("i", width) or array("i", bytes(4 * width))  # scratch for the native kernel
        self._reuse = None

    def _read(self, f, n):
        data = f.read(n) if n else b""
        if len(data) != n:
            raise ModelError("needs %d bytes at offset %d, the file ends" % (n, self.file_bytes))
        self.file_bytes += n
        return data

    def _take(self, kind, count):
        return self._reuse.take(kind, count) if self._reuse is not None else None

    def _read_into(self, f, buf, n):
        if f.readinto(buf) != n:
            raise ModelError("needs %d bytes at offset %d, the file ends" % (n, self.file_bytes))
        self.file_bytes += n
        return buf

    def _weights(self, f, count):
        # int8 weights as stored (two's complement bytes), read in place: no second copy of the biggest array
        return self._read_into(f, self._take("w", count) or bytearray(count), count)

    def _array(self, f, typecode, count):
        # little-endian raw bytes into an array (both CPython and MicroPython copy raw bytes verbatim)
        n = count * (4 if typecode == "i" else 1)
        kept = self._take(typecode, count)
        return self._read_into(f, kept, n) if kept is not None else array(typecode, self._read(f, n))

    def quantize(self, features):
        """Float features -> int8 input values (a list): clip(round(x / scale) + zp, -128, 127)."""
        if len(features) != self.n_features:
            raise ValueError("model takes %d features, got %d" % (self.n_features, len(features)))
        scale = self.in_scale
        zp = self.in_zp
        out = []
        for v in features:
            q = round_half_away(v / scale) + zp
            out.append(-128 if q < -128 else (127 if q > 127 else q))
        return out

    def logits(self, x_q):
        """int8 logits (a list) from int8 inputs."""
        h = x_q
        for layer in self.layers:
            h = self._fc(layer, h)
        return h

    def _fc(self, layer, h):
        n_in = layer.n_in
        zp = layer.in_zp
        xs = array("i", [v - zp for v in h])
        w = layer.w
        bias = layer.bias
        native = self._native
        if native is not None:
            acc = self._acc
            _copy32(acc, bias, layer.n_out)
            native(w, xs, acc, n_in | (layer.n_out << 16))
        else:
            acc = bias
        low = layer.out_zp if (layer.relu and layer.out_zp > -128) else -128
        out = []
        mult = layer.mult
        shift = layer.shift
        out_zp = layer.out_zp
        base = 0
        for o in range(layer.n_out):
            if native is None:
                a = acc[o]
                j = base
                for v in xs:
                    b = w[j]
                    a += (b - 256 if b > 127 else b) * v
                    j += 1
                base += n_in
            else:
                a = acc[o]
            q = requantize(a, mult[o], shift[o]) + out_zp
            out.append(low if q < low else (127 if q > 127 else q))
        return out

    def probabilities(self, logits_q):
        """int8 softmax output (a list, scale 1/256, zero point -128), remapped by the action map if any."""
        last = self.layers[-1]
        scale = last.out_scale
        top = max(logits_q)
        exps = [exp((q - top) * scale) for q in logits_q]
        total = lsum(exps)
        probs = []
        for e in exps:
            q = round_half_away(e / total / SOFTMAX_SCALE) + SOFTMAX_ZERO_POINT
            probs.append(127 if q > 127 else q)
        if self.action_map is not None:
            probs = [probs[a] for a in self.action_map]
        return probs

    def infer(self, features):
        """Decide from float features: (action index, its probability, int8 probabilities)."""
        probs = self.probabilities(self.logits(self.quantize(features)))
        best = 0
        for i in range(1, len(probs)):
            if probs[i] > probs[best]:
                best = i
        return best, (probs[best] - SOFTMAX_ZERO_POINT) * SOFTMAX_SCALE, probs


def load(path, native=True, reuse=None):
    """Read and parse the .npcm file at `path` (MemoryError when it does not fit the heap), into the arrays
    of `reuse` (a Buffers) where their sizes match."""
    with open(path, "rb") as f:
        return Model(f, native, reuse)

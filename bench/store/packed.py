"""Integer arrays packed for the results store: little-endian int64 deltas, zlib-compressed.

Replayed inputs are stored one row per run, device and channel (table `input_sends`) with their sequence
numbers and send times in this form: 13x smaller than a row per input on a stored nightly (docs/results.md);
a finished run's frame records one row per run and device, a packed array per field (table `frame_packs`,
bench.store.frame_columns). Deltas and their running sum are exact for any int64 values (they wrap), so the
arrays read back bit for bit."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

NONE = -1  # an absent value (an input sent as fast as possible has no due time); never a real time or seq


def pack(values: Sequence[int]) -> bytes:
    """`values` (int64) as compressed deltas."""
    array = np.asarray(values, dtype=np.int64)
    return zlib.compress(np.diff(array, prepend=np.int64(0)).astype("<i8").tobytes(), 6)


def unpack(blob: bytes) -> np.ndarray:
    """The int64 array `pack` was given."""
    return np.cumsum(np.frombuffer(zlib.decompress(bytes(blob)), dtype="<i8"), dtype=np.int64)

"""Apply a BSDIFF40 patch (the format PyPI bsdiff4 writes): bsdiff4's C code when installed, else pure Python.

The pure-Python path lets the host agent apply deltas on a target where bsdiff4 has no wheel."""

from __future__ import annotations

import bz2

try:
    import bsdiff4
except ImportError:  # no wheel for this target: the portable path below
    bsdiff4 = None


def _offtin(buf: bytes) -> int:
    value = int.from_bytes(buf[:8], "little") & ~(1 << 63)
    return -value if buf[7] & 0x80 else value


def patch_portable(old: bytes, patch: bytes) -> bytes:
    """`new` from `old` and a BSDIFF40 patch, in pure Python; ValueError on a damaged patch."""
    if len(patch) < 32 or patch[:8] != b"BSDIFF40":
        raise ValueError("not a BSDIFF40 patch")
    ctrl_len, diff_len, new_size = _offtin(patch[8:16]), _offtin(patch[16:24]), _offtin(patch[24:32])
    if ctrl_len < 0 or diff_len < 0 or new_size < 0 or 32 + ctrl_len + diff_len > len(patch):
        raise ValueError("BSDIFF40 header lengths are out of range")
    try:
        ctrl = bz2.decompress(patch[32 : 32 + ctrl_len])
        diff = bz2.decompress(patch[32 + ctrl_len : 32 + ctrl_len + diff_len])
        extra = bz2.decompress(patch[32 + ctrl_len + diff_len :])
    except (OSError, ValueError) as exc:
        raise ValueError(f"BSDIFF40 block does not decompress: {exc}") from None
    new = bytearray()
    old_pos = diff_pos = extra_pos = 0
    for i in range(0, len(ctrl) - 23, 24):
        add, copy, seek = _offtin(ctrl[i : i + 8]), _offtin(ctrl[i + 8 : i + 16]), _offtin(ctrl[i + 16 : i + 24])
        if add < 0 or copy < 0 or len(new) + add + copy > new_size:
            raise ValueError("BSDIFF40 control block is inconsistent")
        src = old[old_pos : old_pos + add].ljust(add, b"\0")
        delta = diff[diff_pos : diff_pos + add]
        if len(delta) != add:
            raise ValueError("BSDIFF40 diff block is shorter than its control block says")
        new += bytes((a + b) & 0xFF for a, b in zip(src, delta))
        new += extra[extra_pos : extra_pos + copy]
        diff_pos, extra_pos, old_pos = diff_pos + add, extra_pos + copy, old_pos + add + seek
    if len(new) != new_size:
        raise ValueError("BSDIFF40 patch produced the wrong size")
    return bytes(new)


def apply_patch(old: bytes, patch: bytes) -> bytes:
    """`new` from `old` and a BSDIFF40 patch; ValueError on a damaged patch."""
    if bsdiff4 is None:
        return patch_portable(old, patch)
    try:
        return bsdiff4.patch(old, patch)
    except Exception as exc:  # bsdiff4 raises ValueError or RuntimeError depending on the damage
        raise ValueError(f"patch does not apply: {exc}") from None

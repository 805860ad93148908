"""The host agent's BSDIFF40 applier: the pure-Python path rebuilds what bsdiff4 diffed, and refuses damage."""

from __future__ import annotations

import random

import bsdiff4
import npc_bspatch
import pytest


@pytest.mark.parametrize("size", [0, 1, 4096, 60_000])
def test_portable_patch_matches_bsdiff4(size: int) -> None:
    rng = random.Random(size)
    old = rng.randbytes(size)
    new = bytearray(old)
    for _ in range(4):
        if size:
            at = rng.randrange(size)
            new[at : at + 40] = rng.randbytes(25)
    new = bytes(new) + rng.randbytes(77)
    patch = bsdiff4.diff(old, new)
    assert npc_bspatch.patch_portable(old, patch) == new == npc_bspatch.apply_patch(old, patch)


def test_damaged_patch_is_a_value_error() -> None:
    old, new = b"a" * 1000, b"a" * 500 + b"b" * 500
    patch = bytearray(bsdiff4.diff(old, new))
    patch[40] ^= 0xFF
    for apply in (npc_bspatch.patch_portable, npc_bspatch.apply_patch):
        with pytest.raises(ValueError):
            apply(old, bytes(patch))
        with pytest.raises(ValueError):
            apply(old, b"NOTBSDIFF" + bytes(40))

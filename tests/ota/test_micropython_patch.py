"""micropython/npcpatch.py in the real MicroPython VM rebuilds what bench/ota/delta.py diffed (bsdiff4-zlib)."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from bench.core.programs import get_program
from bench.ota.delta import make_patch

REPO = Path(__file__).resolve().parents[2]
MICROPYTHON = get_program("micropython").find()
pytestmark = [pytest.mark.e2e, pytest.mark.programs("micropython")]
DRIVER = """
import sys, npcpatch
try:
    print("ok", npcpatch.apply(sys.argv[1], sys.argv[2], sys.argv[3]))
except ValueError as exc:
    print("refused", exc)
"""


def finetuned(npcm: bytes) -> bytes:
    """The model with its last layer's weights nudged by one step: what a fine-tune ships as a delta."""
    out = bytearray(npcm)
    for i in range(len(out) - 300, len(out) - 50):
        out[i] ^= 1
    return bytes(out)


def mp_apply(tmp_path: Path, old: bytes, patch: bytes) -> tuple[str, bytes]:
    (tmp_path / "old").write_bytes(old)
    (tmp_path / "patch").write_bytes(patch)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {**os.environ, "MICROPYPATH": f"{REPO / 'micropython'}:.frozen"}
    args = [MICROPYTHON, str(tmp_path / "driver.py"), *(str(tmp_path / n) for n in ("old", "patch", "new"))]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    new = tmp_path / "new"
    return proc.stdout.strip(), new.read_bytes() if new.exists() else b""


def test_micropython_rebuilds_models_from_zlib_deltas(tmp_path: Path) -> None:
    models = REPO / "fixtures" / "models"
    v1 = (models / "npc-policy-int8.npcm").read_bytes()
    pairs = [(v1, (models / "npc-policy-int8-v2.npcm").read_bytes()), (v1, finetuned(v1))]
    rng = random.Random(5)
    old = rng.randbytes(30_000)
    new = bytearray(old[:10_000] + rng.randbytes(3000) + old[12_000:])
    new[20_000:20_040] = bytes(40)
    pairs.append((old, bytes(new)))
    for old, new in pairs:
        patch = make_patch(old, new, "bsdiff4-zlib")
        verdict, rebuilt = mp_apply(tmp_path, old, patch)
        assert verdict == f"ok {len(new)}" and rebuilt == new


def test_damaged_or_foreign_patches_are_refused(tmp_path: Path) -> None:
    old, new = b"a" * 5000, b"a" * 2500 + b"b" * 2600
    patch = bytearray(make_patch(old, new, "bsdiff4-zlib"))
    assert mp_apply(tmp_path, old, make_patch(old, new, "bsdiff4"))[0].startswith("refused")  # BSDIFF40 (bz2)
    assert mp_apply(tmp_path, old, bytes(patch[: len(patch) - 50]))[0].startswith("refused")  # truncated


def test_a_finetune_delta_is_much_smaller_than_the_model() -> None:
    v1 = (REPO / "fixtures" / "models" / "npc-policy-int8.npcm").read_bytes()
    assert len(make_patch(v1, finetuned(v1), "bsdiff4-zlib")) < len(v1) // 4

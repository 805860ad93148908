"""bsdiff4 deltas between model versions and their manifests (the product's DeltaManifest).

Two containers for the same bsdiff algorithm (control triples, diff bytes, extra bytes from PyPI bsdiff4):
- `bsdiff4`: the standard BSDIFF40 file, bz2-compressed blocks (the host agent applies it with bsdiff4).
- `bsdiff4-zlib`: for microcontrollers, which have no bz2: magic `BSDIFFZ1`, the three block lengths as
  BSDIFF40 int64s, the control block raw, the diff block zlib-compressed with a 1 KB window (wbits 10,
  so MicroPython's `deflate` needs 1 KB to stream it), the extra block raw. Applied streaming
  (micropython/npcpatch.py): old file, patch and new file never need to be in memory at once.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import bsdiff4
import bsdiff4.core

ALGOS = ("bsdiff4", "bsdiff4-zlib")
ZLIB_MAGIC = b"BSDIFFZ1"
ZLIB_WBITS = 10


def make_patch(base: bytes, target: bytes, algo: str = "bsdiff4") -> bytes:
    """A patch turning `base` into `target`, in container `algo`."""
    if algo == "bsdiff4":
        return bsdiff4.diff(base, target)
    if algo == "bsdiff4-zlib":
        control, diff, extra = bsdiff4.core.diff(base, target)
        packer = zlib.compressobj(9, zlib.DEFLATED, ZLIB_WBITS)
        zdiff = packer.compress(diff) + packer.flush()
        lengths = b"".join(bsdiff4.core.encode_int64(n) for n in (len(control), len(zdiff), len(target)))
        return ZLIB_MAGIC + lengths + control + zdiff + extra
    raise ValueError(f"unknown delta algorithm {algo!r} (known: {', '.join(ALGOS)})")


def delta_manifest(base: dict[str, Any], target: dict[str, Any], patch: bytes, algo: str = "bsdiff4") -> dict[str, Any]:
    """An unsigned delta manifest from the base and target model manifests and the patch bytes.

    A bsdiff patch covers the whole file, so the layer order is the file itself (`"layers": ["all"]`)."""
    return {
        "name": target["name"],
        "algo": algo,
        "base": base["sha256"],
        "base_version": base["version"],
        "target": target["sha256"],
        "target_version": target["version"],
        "size": target["size"],
        "patch_sha256": hashlib.sha256(patch).hexdigest(),
        "patch_size": len(patch),
        "layers": ["all"],
    }

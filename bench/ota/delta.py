"""bsdiff4 deltas between model versions and their manifests (the product's DeltaManifest)."""

from __future__ import annotations

import hashlib
from typing import Any

import bsdiff4

DELTA_ALGO = "bsdiff4"


def make_patch(base: bytes, target: bytes) -> bytes:
    """A BSDIFF40 patch turning `base` into `target`."""
    return bsdiff4.diff(base, target)


def apply_patch(base: bytes, patch: bytes) -> bytes:
    """`target` from `base` and a BSDIFF40 patch; ValueError when the patch is not one."""
    try:
        return bsdiff4.patch(base, patch)
    except Exception as exc:  # bsdiff4 raises ValueError or its own errors on a damaged patch
        raise ValueError(f"patch does not apply: {exc}") from None


def delta_manifest(base: dict[str, Any], target: dict[str, Any], patch: bytes) -> dict[str, Any]:
    """An unsigned delta manifest from the base and target model manifests and the patch bytes.

    A bsdiff patch covers the whole file, so the layer order is the file itself (`"layers": ["all"]`)."""
    return {
        "name": target["name"],
        "algo": DELTA_ALGO,
        "base": base["sha256"],
        "base_version": base["version"],
        "target": target["sha256"],
        "target_version": target["version"],
        "size": target["size"],
        "patch_sha256": hashlib.sha256(patch).hexdigest(),
        "patch_size": len(patch),
        "layers": ["all"],
    }

"""Fixtures for the OTA tests: a store with two signed versions of a model (v2 differs a little from v1)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.store import ModelStore

MODEL_SIZE = 50_000


def model_bytes(seed: int, size: int = MODEL_SIZE) -> bytes:
    """Deterministic incompressible bytes standing in for a model file."""
    return random.Random(seed).randbytes(size)


@pytest.fixture
def two_versions(tmp_path: Path) -> tuple[ModelStore, bytes, bytes]:
    """A store holding blob@1 and blob@2 (v2 = v1 with a few changed ranges), signed with the dev key."""
    v1 = model_bytes(1)
    v2 = bytearray(v1)
    for start in (1000, 20_000, 45_000):
        v2[start : start + 64] = model_bytes(start, 64)
    (tmp_path / "v1.bin").write_bytes(v1)
    (tmp_path / "v2.bin").write_bytes(bytes(v2))
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(tmp_path / "v1.bin", key, name="blob", fmt="raw")
    store.publish(tmp_path / "v2.bin", key, name="blob", fmt="raw")
    return store, v1, bytes(v2)

"""Model store: signed manifests, deltas, versioning and its errors."""

from __future__ import annotations

from pathlib import Path

import bsdiff4
import pytest

from bench.core.errors import ConfigError
from bench.models import guess_name_and_format
from bench.models.signing import (
    DEV_PRIVATE_KEY,
    DEV_PUBLIC_KEY,
    generate_key,
    load_private_key,
    load_public_key,
    verify_manifest,
)
from bench.ota.store import ModelStore


def test_publish_signs_versions_and_a_delta_that_rebuilds_the_target(two_versions) -> None:
    store, v1, v2 = two_versions
    pub = load_public_key(DEV_PUBLIC_KEY)
    m2 = store.resolve("blob")
    assert m2["version"] == 2 and verify_manifest(m2, pub)
    dm = store.delta_manifest("blob", 2, 1)
    assert verify_manifest(dm, pub)
    assert (dm["base"], dm["target"]) == (store.manifest("blob", 1)["sha256"], m2["sha256"])
    patch = store.delta_path("blob", 2, 1).read_bytes()
    assert len(patch) == dm["patch_size"] < len(v2) // 10
    assert bsdiff4.patch(v1, patch) == v2
    assert store.delta_from("blob", 2, dm["base"]) == dm
    assert store.delta_from("blob", 2, m2["sha256"]) is None


def test_tampered_manifest_no_longer_verifies(two_versions) -> None:
    store, _, _ = two_versions
    m = dict(store.resolve("blob@1"))
    m["size"] += 1
    assert not verify_manifest(m, load_public_key(DEV_PUBLIC_KEY))


def test_publish_refuses_same_content_old_version_and_bad_name(two_versions, tmp_path: Path) -> None:
    store, _, v2 = two_versions
    key = load_private_key(DEV_PRIVATE_KEY)
    (tmp_path / "same.bin").write_bytes(v2)
    with pytest.raises(ConfigError, match="identical"):
        store.publish(tmp_path / "same.bin", key, name="blob", fmt="raw")
    (tmp_path / "new.bin").write_bytes(b"new")
    with pytest.raises(ConfigError, match="not newer"):
        store.publish(tmp_path / "new.bin", key, name="blob", fmt="raw", version=2)
    with pytest.raises(ConfigError, match="model name"):
        store.publish(tmp_path / "new.bin", key, name="Bad Name", fmt="raw")
    with pytest.raises(ConfigError, match="no blob@7"):
        store.resolve("blob@7")
    with pytest.raises(ConfigError, match="no model 'other'"):
        store.resolve("other")


def test_first_version_has_no_delta(tmp_path: Path) -> None:
    (tmp_path / "m.bin").write_bytes(b"x" * 100)
    store = ModelStore(tmp_path / "s")
    published = store.publish(tmp_path / "m.bin", generate_key(), name="m", fmt="raw")
    assert published.delta is None and store.versions("m") == [1]


def test_name_and_format_from_file_name() -> None:
    assert guess_name_and_format(Path("npc-policy-int8.tflite")) == ("npc-policy", "tflite-int8")
    assert guess_name_and_format(Path("npc-policy-int8-v2.npcm")) == ("npc-policy", "npcm-int8")
    with pytest.raises(ConfigError, match="unknown format"):
        guess_name_and_format(Path("model.onnx"))

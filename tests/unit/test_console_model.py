"""The console's model: what a switch-arm64 device is configured to run travels in front of its image's initramfs
(the boot itself: tests/e2e/test_arm64.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.core.errors import ConfigError
from bench.devices.console_model import DEVICE_DIR, PAD, device_archive, initrd_for
from bench.models.signing import DEV_PUBLIC_KEY, load_public_key, verify_manifest

MODELS = Path(__file__).resolve().parent.parent.parent / "fixtures" / "models"


def entries(archive: bytes) -> dict[str, bytes]:
    """The files of a cpio "newc" archive: name -> contents (directories and the trailer left out)."""
    found, pos = {}, 0
    while archive[pos : pos + 6] == b"070701":
        fields = [int(archive[pos + 6 + 8 * i : pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_at = pos + 110
        name = archive[name_at : name_at + namesize - 1].decode()
        data_at = name_at + namesize + (-(110 + namesize) % 4)
        if name == "TRAILER!!!":
            break
        if mode & 0o100000:
            found[name] = archive[data_at : data_at + size]
        pos = data_at + size + (-size % 4)
    return found


def test_the_factory_model_boots_the_image_as_built(tmp_path: Path) -> None:
    image = tmp_path / "initrd.img"
    image.write_bytes(b"image")
    device = load_fleet().get("switch-1")
    assert device_archive(device) is None
    assert initrd_for(device, image, tmp_path / "cache") == image


def test_another_model_travels_in_front_of_the_image_signed_for_the_device(tmp_path: Path) -> None:
    image = tmp_path / "initrd.img"
    image.write_bytes(b"\x02\x21\x4c\x18 the image's lz4 archive")
    device = load_fleet().get("switch-1").with_settings(model="npc-policy-63k-int8")
    archive = device_archive(device)
    assert archive is not None and len(archive) % PAD == 0
    files = entries(archive)
    model = (MODELS / "npc-policy-63k-int8.tflite").read_bytes()
    assert files[f"{DEVICE_DIR}/models/npc-policy-63k-int8.tflite"] == model
    assert files[f"{DEVICE_DIR}/trusted.pub.pem"] == DEV_PUBLIC_KEY.read_bytes()
    manifest = json.loads(files[f"{DEVICE_DIR}/models/npc-policy-63k-int8.json"])
    assert manifest["sha256"] == hashlib.sha256(model).hexdigest() and manifest["name"] == "npc-policy-63k"
    assert verify_manifest(manifest, load_public_key(DEV_PUBLIC_KEY))
    booted = initrd_for(device, image, tmp_path / "cache")
    assert booted.read_bytes() == archive + image.read_bytes()  # the device's files first, then the image's
    assert initrd_for(device, image, tmp_path / "cache") == booted  # made once
    image.write_bytes(b"\x02\x21\x4c\x18 a rebuilt image")
    assert initrd_for(device, image, tmp_path / "cache").read_bytes().endswith(b"a rebuilt image")


def test_a_model_that_is_not_there_names_the_device() -> None:
    device = load_fleet().get("switch-1").with_settings(model="/nonexistent/team.tflite")
    with pytest.raises(ConfigError, match="device switch-1"):
        device_archive(device)

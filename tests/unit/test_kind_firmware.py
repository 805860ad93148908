"""A kind declares the firmware image it flashes (`Kind.firmware`); nothing infers it from a setting's name."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.bundles.fingerprint import firmware_sha256
from bench.config.fleet import Device
from bench.config.kinds import Kind, Settings, SshLink, file_path, get_kind
from bench.core.paths import ESP32C6_DEFAULT_FIRMWARE, ROOT


@dataclass(frozen=True)
class WithFirmware(Settings):
    firmware: str = file_path()


def test_the_esp32c6_kind_names_its_default_image_and_a_device_can_override_it(tmp_path: Path) -> None:
    kind = get_kind("esp32c6")
    assert kind.firmware_image(kind.defaults()) == ESP32C6_DEFAULT_FIRMWARE
    assert kind.firmware_image(kind.defaults().replace(firmware="build/fw.bin")) == ROOT / "build" / "fw.bin"
    image = tmp_path / "fw.bin"
    image.write_bytes(b"\xe9 an image")
    device = Device(name="c6", kind="esp32c6", link=None, settings={"firmware": str(image)})
    assert firmware_sha256(device) == hashlib.sha256(b"\xe9 an image").hexdigest()


def test_a_kind_without_firmware_has_none_even_with_a_setting_of_that_name() -> None:
    kind = Kind("fw-named", "a setting called firmware, no firmware flashed", SshLink, WithFirmware)
    assert kind.firmware_image(WithFirmware(firmware="/x.bin")) is None
    assert firmware_sha256(Device(name="pi", kind="pi5", link=None)) is None


def test_a_kind_that_flashes_firmware_needs_the_setting() -> None:
    with pytest.raises(ValueError, match="its settings need a `firmware` field"):
        Kind("bad", "flashes firmware without the setting", SshLink, Settings, firmware=ESP32C6_DEFAULT_FIRMWARE)

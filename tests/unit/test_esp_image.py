"""The ESP image format shared by the driver, the virtual ROM and the firmware generator."""

from __future__ import annotations

from pathlib import Path

import pytest
from esptool.bin_image import LoadFirmwareImage

from bench.devices.esp_image import ImageError, build_image, parse_image
from bench.virtual.esp32c6.boot import DEFAULT_BANNER, check_flash_image

REPO = Path(__file__).resolve().parents[2]
from make_virtual_firmware import DEFAULT_BANNER as VIRTUAL_BANNER  # noqa: E402
from make_virtual_firmware import build  # noqa: E402


def test_generated_firmware_is_reproducible_and_committed() -> None:
    assert build() == build()
    assert (REPO / "firmware" / "esp32c6" / "host-clock-vm.bin").read_bytes() == build()


def test_esptool_reads_our_image_as_a_valid_esp32c6_image(tmp_path: Path) -> None:
    path = tmp_path / "fw.bin"
    path.write_bytes(build(pad=5000))
    image = LoadFirmwareImage("esp32c6", str(path))
    assert image.chip_id == 13
    assert image.checksum == image.calculate_checksum()
    assert image.stored_digest == image.calc_digest
    ours = parse_image(path.read_bytes())
    assert [(s.addr, bytes(s.data)) for s in image.segments] == list(ours.segments)


def test_board_boots_the_virtual_firmware_with_its_banner() -> None:
    decision = check_flash_image(build() + b"\xff" * 4096)
    assert decision.image is not None and decision.banner == VIRTUAL_BANNER
    plain = build_image([(0x40800000, b"\x13\x00\x00\x00")], entry=0x40800000)
    assert check_flash_image(plain).banner == DEFAULT_BANNER


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff" * 4096, "invalid header: 0xffffffff"),
        (build_image([(0x40370000, b"\0" * 8)], entry=0x40370000, chip_id=9), "image is for ESP32-S3, not ESP32-C6"),
        (build()[:100], "runs past the end"),
        (build()[:1] + b"\x00" + build()[2:], "segment count"),
    ],
)
def test_invalid_images_are_rejected_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(ImageError, match=why):
        parse_image(data)


def test_one_flipped_bit_in_a_segment_breaks_the_checksum() -> None:
    image = bytearray(build())
    image[100] ^= 0x01  # inside the DROM segment's data
    with pytest.raises(ImageError, match="checksum mismatch"):
        parse_image(bytes(image))


def test_header_fields_the_rom_reads_are_checked() -> None:
    image = bytearray(build())
    image[3] = (image[3] & 0xF0) | 0x0F  # flash frequency code the C6 ROM does not know
    with pytest.raises(ImageError, match="invalid flash frequency 0xf"):
        parse_image(bytes(image))
    image = bytearray(build())
    image[2] = 7
    with pytest.raises(ImageError, match="invalid flash mode 0x7"):
        parse_image(bytes(image))
    assert parse_image(build(), chip_revision=99).entry == 0x40800000
    with pytest.raises(ImageError, match=r"chip revision v1.0 is outside the image's v0.0 - v0.99"):
        parse_image(build(), chip_revision=100)
    assert check_flash_image(build(), chip_revision=100).problem.startswith("chip revision v1.0")

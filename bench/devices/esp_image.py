"""The ESP application image format (magic 0xE9): building and checking images for one chip.

Shared by the ESP32-C6 driver (refuse a foreign image before touching a board), the virtual board's
ROM (boot or boot-loop) and the virtual firmware generator, so all three agree on what "valid" means.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

ESP_IMAGE_MAGIC = 0xE9
CHECKSUM_SEED = 0xEF
ESP32C6_CHIP_ID = 13
CHIP_NAMES = {0: "ESP32", 2: "ESP32-S2", 5: "ESP32-C3", 9: "ESP32-S3", 12: "ESP32-C2", 13: "ESP32-C6", 16: "ESP32-H2"}

_HEADER = struct.Struct("<BBBBI")  # magic, segment count, flash mode, size/freq, entry
_EXTENDED = struct.Struct("<BBBBHBHH4sB")  # wp pin, drive x3, chip id, min rev, min/max rev full, reserved, hash
_SEGMENT = struct.Struct("<II")  # load address, length
HEADER_SIZE = _HEADER.size + _EXTENDED.size
_FLASH_SIZE_CODES = {1: 0x00, 2: 0x10, 4: 0x20, 8: 0x30, 16: 0x40}
FLASH_MODES = {0: "QIO", 1: "QOUT", 2: "DIO", 3: "DOUT"}
FLASH_MODE_DIO = 2  # ESP-IDF writes DIO even for QIO builds: the ROM cannot read QIO; the bootloader switches
C6_FLASH_FREQ_CODES = {0x0: "80m", 0x2: "20m"}  # the C6 ROM's codes (40m is written as 0x0 too)
C6_MAX_CHIP_REV_FULL = 99  # ESP-IDF 5.x: CONFIG_ESP32C6_REV_MAX_FULL (v0.99)


class ImageError(ValueError):
    """The bytes are not a valid image for the wanted chip; the message says why."""


@dataclass(frozen=True)
class ImageInfo:
    """What the header of a checked image says."""

    chip_id: int
    entry: int
    segments: tuple[tuple[int, bytes], ...]
    length: int  # bytes the image occupies, checksum and digest included

    @property
    def chip_name(self) -> str:
        """The chip's marketing name, e.g. ESP32-C6."""
        return CHIP_NAMES.get(self.chip_id, f"chip id {self.chip_id}")


def xor_checksum(data: bytes, seed: int = CHECKSUM_SEED) -> int:
    """XOR of every byte of `data`, seeded with 0xEF (the ROM's data and image checksum)."""
    if not data:
        return seed
    return int(np.bitwise_xor.reduce(np.frombuffer(data, dtype=np.uint8))) ^ seed


def checksum(segments: list[tuple[int, bytes]] | tuple[tuple[int, bytes], ...]) -> int:
    """The image checksum: XOR of every segment byte, seeded with 0xEF."""
    return xor_checksum(b"".join(data for _, data in segments))


def build_image(
    segments: list[tuple[int, bytes]], *, entry: int, chip_id: int = ESP32C6_CHIP_ID, flash_mb: int = 4
) -> bytes:
    """An image with `segments` (load address, data) for `chip_id`, with checksum and SHA-256 appended; the
    header as ESP-IDF 5.x writes it for MicroPython's ESP32_GENERIC_C6 (DIO, 80 MHz, 4 MB, chip rev v0.0-v0.99)."""
    padded = [(addr, data + b"\0" * (-len(data) % 4)) for addr, data in segments]
    out = bytearray(_HEADER.pack(ESP_IMAGE_MAGIC, len(padded), FLASH_MODE_DIO, _FLASH_SIZE_CODES[flash_mb], entry))
    out += _EXTENDED.pack(0xEE, 0, 0, 0, chip_id, 0, 0, C6_MAX_CHIP_REV_FULL, b"\0" * 4, 1)
    for addr, data in padded:
        out += _SEGMENT.pack(addr, len(data)) + data
    out += b"\0" * (15 - len(out) % 16)
    out.append(checksum(padded))
    out += hashlib.sha256(out).digest()
    return bytes(out)


def parse_image(data: bytes, *, chip_id: int | None = ESP32C6_CHIP_ID, chip_revision: int | None = None) -> ImageInfo:
    """Check `data` (an image, possibly followed by other bytes) as the ROM does; ImageError says what is wrong.
    `chip_revision` (major * 100 + minor, as the eFuses say) must lie in the image's supported range."""
    if len(data) < HEADER_SIZE:
        raise ImageError(f"too short for an image header ({len(data)} bytes)")
    magic, count, flash_mode, size_freq, entry = _HEADER.unpack_from(data)
    if magic != ESP_IMAGE_MAGIC:
        raise ImageError(f"invalid header: 0x{struct.unpack_from('<I', data)[0]:08x} (magic is not 0xE9)")
    fields = _EXTENDED.unpack_from(data, _HEADER.size)
    found_chip, min_rev_full, max_rev_full, hash_appended = fields[4], fields[6], fields[7], fields[9]
    if chip_id is not None and found_chip != chip_id:
        raise ImageError(
            f"image is for {CHIP_NAMES.get(found_chip, f'chip id {found_chip}')}, "
            f"not {CHIP_NAMES.get(chip_id, f'chip id {chip_id}')}"
        )
    if flash_mode not in FLASH_MODES:
        raise ImageError(f"invalid flash mode 0x{flash_mode:x} in the header")
    if found_chip == ESP32C6_CHIP_ID and size_freq & 0x0F not in C6_FLASH_FREQ_CODES:
        raise ImageError(f"invalid flash frequency 0x{size_freq & 0x0F:x} in the header")
    if chip_revision is not None and not min_rev_full <= chip_revision <= max_rev_full:
        raise ImageError(
            f"chip revision v{chip_revision // 100}.{chip_revision % 100} is outside the image's "
            f"v{min_rev_full // 100}.{min_rev_full % 100} - v{max_rev_full // 100}.{max_rev_full % 100}"
        )
    if count == 0 or count > 16:
        raise ImageError(f"invalid segment count {count}")
    pos = HEADER_SIZE
    segments: list[tuple[int, bytes]] = []
    for index in range(count):
        if pos + _SEGMENT.size > len(data):
            raise ImageError(f"segment {index} header runs past the end of the data")
        addr, length = _SEGMENT.unpack_from(data, pos)
        pos += _SEGMENT.size
        if pos + length > len(data):
            raise ImageError(f"segment {index} (0x{length:x} bytes at 0x{addr:08x}) runs past the end of the data")
        segments.append((addr, bytes(data[pos : pos + length])))
        pos += length
    pos += 15 - pos % 16
    if pos >= len(data):
        raise ImageError("checksum byte missing")
    if data[pos] != checksum(segments):
        raise ImageError(f"checksum mismatch: image says 0x{data[pos]:02x}, segments give 0x{checksum(segments):02x}")
    pos += 1
    if hash_appended == 1:
        if pos + 32 > len(data):
            raise ImageError("SHA-256 digest missing")
        if hashlib.sha256(data[:pos]).digest() != data[pos : pos + 32]:
            raise ImageError("SHA-256 digest mismatch")
        pos += 32
    return ImageInfo(chip_id=found_chip, entry=entry, segments=tuple(segments), length=pos)

#!/usr/bin/env python3
"""Build `host-clock-vm.bin`: a small, valid ESP32-C6 image (chip id 13, checksum, SHA-256) that a
virtual ESP32-C6 boots into MicroPython. Reproducible: the same inputs give the same bytes.

    python firmware/esp32c6/make_virtual_firmware.py [--out PATH] [--banner TEXT] [--pad BYTES]

`--pad` appends an incompressible-looking but deterministic data segment, to make images of a realistic
size for flashing benchmarks (the official ESP32_GENERIC_C6 firmware is about 1.8 MB).
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.devices.esp_image import build_image
from bench.virtual.esp32c6.boot import FIRMWARE_MARKER

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "host-clock-vm.bin"
DEFAULT_BANNER = "MicroPython v1.29.0 on 2026-01-01; ESP32C6 module with ESP32C6 (npc-hil-bench virtual firmware)"
ENTRY = 0x40800000  # start of HP SRAM, where the ESP-IDF bootloader's entry lives on the C6
IRAM = 0x40800000
DROM = 0x42800020
# RISC-V: `j .` (an endless loop): the image has code at its entry point, like any firmware.
CODE = bytes.fromhex("6f000000")


def app_description(version: str = "v1.29.0") -> bytes:
    """An esp_app_desc_t (256 bytes, magic 0xABCD5432) as ESP-IDF puts first in the DROM segment."""
    return struct.pack(
        "<II8s32s32s16s16s32s32sHHB3s72s",
        0xABCD5432,
        0,
        b"",
        version.encode(),
        b"micropython-virtual",
        b"00:00:00",
        b"Jan  1 2026",
        b"virtual (no ESP-IDF)",
        bytes(32),
        0,
        0xFFFF,
        16,  # log2 of the 64 KB MMU page
        b"",
        b"",
    )


def filler(size: int) -> bytes:
    """`size` deterministic bytes that compress about as well as firmware code does (roughly 60 %)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        block = hashlib.sha256(counter.to_bytes(8, "little")).digest()
        out += block[:20] + bytes(12)  # 20 random bytes, 12 zeros per 32
        counter += 1
    return bytes(out[:size])


def build(banner: str = DEFAULT_BANNER, pad: int = 0) -> bytes:
    """The image bytes."""
    segments = [(IRAM, CODE), (DROM, app_description() + FIRMWARE_MARKER + banner.encode() + b"\0")]
    if pad:
        segments.append((DROM + 0x10000, filler(pad)))
    return build_image(segments, entry=ENTRY)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--banner", default=DEFAULT_BANNER)
    parser.add_argument("--pad", type=int, default=0, help="bytes of filler data to add")
    args = parser.parse_args()
    image = build(args.banner, args.pad)
    args.out.write_bytes(image)
    print(f"{args.out}: {len(image)} bytes, sha256 {hashlib.sha256(image).hexdigest()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

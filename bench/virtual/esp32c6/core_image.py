"""The flashed image as the counted core runs it: an ESP32-C6 image whose segments load into the core's memory.

The counted core (bench.virtual.esp32c6.counted: QEMU's RISC-V `virt` machine under -icount) has its memory at
0x8000_0000, where the chip has none, so an image made from the counted firmware's ELF by esptool's own
`elf2image` is recognised by where its segments load. At boot the board writes those very segments, as the
ROM's loader would copy them, into an ELF file that QEMU loads: the bytes esptool wrote are the bytes that run.
Any other valid image (the committed virtual firmware, the official MicroPython build) keeps the unix-port VM.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

from bench.core.errors import BenchError
from bench.devices.esp_image import ImageInfo

CORE_MEMORY = (0x8000_0000, 0x8100_0000)  # QEMU virt's RAM with `-m 16M` (counted.RAM)
IMAGE_NAME = "micropython.bin"  # next to the firmware's ELF
# the header ESP-IDF 5.x writes for MicroPython's ESP32_GENERIC_C6 (as the committed virtual firmware's)
ELF2IMAGE = ("--chip", "esp32c6", "elf2image", "--flash-mode", "dio", "--flash-freq", "80m", "--flash-size", "4MB")
_EHDR = struct.Struct("<16sHHIIIIIHHHHHH")
_PHDR = struct.Struct("<IIIIIIII")
_PT_LOAD, _PF_RWX = 1, 7
_EM_RISCV, _ET_EXEC = 243, 2
_EF_RISCV_RVC = 1  # the firmware is built for rv32imac: compressed instructions


def runs_on_core(image: ImageInfo) -> bool:
    """Whether every segment of `image` loads into the counted core's memory (and none is empty)."""
    low, high = CORE_MEMORY
    return bool(image.segments) and all(low <= addr and addr + len(data) <= high for addr, data in image.segments)


def core_elf(image: ImageInfo) -> bytes:
    """An ELF32 RISC-V executable holding exactly `image`'s segments at their load addresses, entry as the header
    says: what QEMU's `-kernel` loads into the core's memory."""
    count = len(image.segments)
    offset = _EHDR.size + count * _PHDR.size
    headers, payload = bytearray(), bytearray()
    for addr, data in image.segments:
        headers += _PHDR.pack(_PT_LOAD, offset + len(payload), addr, addr, len(data), len(data), _PF_RWX, 4)
        payload += data
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)  # 32-bit, little-endian, version 1
    header = _EHDR.pack(ident, _ET_EXEC, _EM_RISCV, 1, image.entry, _EHDR.size, 0, _EF_RISCV_RVC,
                        _EHDR.size, _PHDR.size, count, 0, 0, 0)  # fmt: skip
    return header + bytes(headers) + bytes(payload)


def image_for(elf: Path) -> Path:
    """The flashable ESP32-C6 image of the counted firmware `elf`, made once by esptool's `elf2image` next to it."""
    image = elf.with_name(IMAGE_NAME)
    if image.is_file() and image.stat().st_mtime >= elf.stat().st_mtime:
        return image
    part = image.with_suffix(".part")
    made = subprocess.run([sys.executable, "-m", "esptool", *ELF2IMAGE, "-o", str(part), str(elf)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if made.returncode != 0:
        raise BenchError(f"esptool elf2image {elf}: {(made.stdout + made.stderr).strip()[-500:]}")
    part.replace(image)
    return image

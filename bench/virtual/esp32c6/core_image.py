"""The flashed image as the counted core runs it: an ESP32-C6 image whose segments load into the core's memory.

The counted core (bench.virtual.esp32c6.counted: QEMU's RISC-V `virt` machine under -icount) has its memory at
0x8000_0000, where the chip has none, so an image made from the counted firmware's ELF by esptool's own
`elf2image` is recognised by where its segments load. At boot the board writes those very segments, as the
ROM's loader would copy them, into an ELF file that QEMU loads: the bytes esptool wrote are the bytes that run.
Any other valid image (the committed virtual firmware, the official MicroPython build) keeps the unix-port VM.
"""

from __future__ import annotations

import struct

from bench.devices.esp_image import ImageInfo

CORE_MEMORY = (0x8000_0000, 0x8100_0000)  # QEMU virt's RAM with `-m 16M` (counted.RAM)
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

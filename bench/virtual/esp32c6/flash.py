"""The board's SPI flash: a persisted file (survives power loss mid-write) plus the filesystem folder."""

from __future__ import annotations

import hashlib
import mmap
import shutil
from pathlib import Path

SECTOR = 4096
ERASED = 0xFF
# MicroPython's VFS partition starts here on an ESP32-C6 build; writes or erases that reach it wipe the files.
FILESYSTEM_OFFSET = 0x200000


class FlashStorage:
    """`size` bytes of NOR flash kept in `path` (memory-mapped), and the folder MicroPython sees as `/`."""

    def __init__(self, path: Path, size: int, fs_dir: Path) -> None:
        self.path = path
        self.size = size
        self.fs_dir = fs_dir
        fs_dir.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.stat().st_size != size:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("wb") as fh:
                chunk = bytes([ERASED]) * (1 << 20)
                for _ in range(size // len(chunk)):
                    fh.write(chunk)
                fh.write(bytes([ERASED]) * (size % len(chunk)))
        self._file = path.open("r+b")
        self._map = mmap.mmap(self._file.fileno(), size)

    @property
    def filesystem_bytes(self) -> int:
        """The size of MicroPython's vfs partition: from FILESYSTEM_OFFSET to the end of the flash (the esp32
        port registers it so when the partition table has none, as partitions-4MiBplus.csv does)."""
        return max(self.size - FILESYSTEM_OFFSET, 0)

    def close(self) -> None:
        """Flush and release the file."""
        self._map.flush()
        self._map.close()
        self._file.close()

    def check_range(self, offset: int, length: int) -> bool:
        """True when [offset, offset+length) lies inside the flash."""
        return offset >= 0 and length >= 0 and offset + length <= self.size

    def read(self, offset: int, length: int) -> bytes:
        """Bytes as stored."""
        return self._map[offset : offset + length]

    def write(self, offset: int, data: bytes) -> None:
        """Program `data` at `offset` (the region was erased by the begin command, so this is a plain store)."""
        self._map[offset : offset + len(data)] = data
        self._touch_filesystem(offset, len(data))

    def erase(self, offset: int, length: int) -> None:
        """Set the range to 0xFF."""
        self._map[offset : offset + length] = bytes([ERASED]) * length
        self._touch_filesystem(offset, length)

    def erase_all(self) -> None:
        """Erase the whole chip, filesystem included."""
        self.erase(0, self.size)

    def md5(self, offset: int, length: int) -> bytes:
        """MD5 digest of a region, as SPI_FLASH_MD5 computes it."""
        return hashlib.md5(self._map[offset : offset + length]).digest()

    def _touch_filesystem(self, offset: int, length: int) -> None:
        if offset + length > FILESYSTEM_OFFSET:
            wipe_folder(self.fs_dir)


def wipe_folder(folder: Path) -> None:
    """Remove everything inside `folder`, keeping the folder."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def jedec_id(size: int, manufacturer: int = 0xEF, memory_type: int = 0x40) -> int:
    """The 24-bit read-ID (0x9F) answer for a flash of `size` bytes: capacity byte = log2(size)."""
    return ((size.bit_length() - 1) << 16) | (memory_type << 8) | manufacturer


class SpiFlashController:
    """The SPI0/1 controller registers esptool drives to run raw flash commands (read-ID, SFDP, reset)."""

    BASE = 0x60003000
    CMD = BASE + 0x00
    ADDR = BASE + 0x04
    USR2 = BASE + 0x20
    W0 = BASE + 0x58
    CMD_USR = 1 << 18
    SFDP_SIGNATURE = 0x50444653  # "SFDP"

    def __init__(self, flash: FlashStorage, manufacturer: int = 0xEF) -> None:
        self.flash = flash
        self.manufacturer = manufacturer
        self.regs: dict[int, int] = {}

    def owns(self, addr: int) -> bool:
        """True for addresses in the controller's register block."""
        return self.BASE <= addr < self.BASE + 0x100

    def read(self, addr: int) -> int:
        """A register value; the command register always reads back as done."""
        if addr == self.CMD:
            return self.regs.get(addr, 0) & ~self.CMD_USR
        return self.regs.get(addr, 0)

    def write(self, addr: int, value: int) -> None:
        """Store a register; setting CMD_USR in CMD runs the user command at once."""
        self.regs[addr] = value
        if addr == self.CMD and value & self.CMD_USR:
            self.regs[self.W0] = self._run(self.regs.get(self.USR2, 0) & 0xFF, self.regs.get(self.ADDR, 0))
            self.regs[addr] = value & ~self.CMD_USR

    def _run(self, opcode: int, address: int) -> int:
        if opcode == 0x9F:  # read JEDEC id
            return jedec_id(self.flash.size, self.manufacturer)
        if opcode == 0x5A:  # read SFDP: only the signature at address 0 is modelled
            return self.SFDP_SIGNATURE if (address >> 8) == 0 else 0xFFFFFFFF
        if opcode == 0x05:  # read status register: idle, not write-protected
            return 0
        return 0  # reset (0x66/0x99), write enable and friends have no answer

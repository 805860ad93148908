"""The ESP32-C6's eFuse read registers (MAC, package, flash capacity, security fuses) and its other registers."""

from __future__ import annotations

import re
from dataclasses import dataclass

EFUSE_BASE = 0x600B0800
MAC_WORD0 = EFUSE_BASE + 0x044
MAC_WORD1 = EFUSE_BASE + 0x048
SYS_DATA_WORD2 = EFUSE_BASE + 0x050  # package version, wafer revision
SYS_DATA_WORD3 = EFUSE_BASE + 0x054  # flash capacity
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def parse_mac(text: str) -> bytes:
    """`60:55:f9:c6:00:01` -> 6 bytes; ValueError naming the bad value."""
    if not _MAC_RE.match(text):
        raise ValueError(f"MAC {text!r} is not six hex bytes separated by ':'")
    return bytes(int(part, 16) for part in text.split(":"))


@dataclass
class Efuses:
    """Fuse values a factory-fresh, unsecured ESP32-C6 (rev v0.1) would read."""

    mac: bytes
    minor_revision: int = 1
    major_revision: int = 0
    package: int = 0
    flash_capacity: int = 0

    @property
    def revision(self) -> int:
        """The chip revision as images state their supported range: major * 100 + minor (v0.1 -> 1)."""
        return self.major_revision * 100 + self.minor_revision

    def registers(self) -> dict[int, int]:
        """Address -> value of the read registers esptool looks at (security fuses read 0: nothing burned)."""
        word0 = int.from_bytes(self.mac[2:6], "big")
        word1 = int.from_bytes(self.mac[0:2], "big") | (0xFFFE << 16)
        word2 = (self.package & 0x7) << 24 | (self.minor_revision & 0xF) << 18 | (self.major_revision & 0x3) << 22
        return {MAC_WORD0: word0, MAC_WORD1: word1, SYS_DATA_WORD2: word2, SYS_DATA_WORD3: self.flash_capacity & 0x7}


class RegisterFile:
    """Every register esptool reads or writes: eFuses as fused, the rest as last written (0 at reset)."""

    def __init__(self, efuses: Efuses) -> None:
        self._fuses = efuses.registers()
        self._written: dict[int, int] = {}

    def read(self, addr: int) -> int:
        """A fuse value, else the last value written, else 0."""
        if addr in self._fuses:
            return self._fuses[addr]
        return self._written.get(addr, 0)

    def write(self, addr: int, value: int) -> None:
        """Store a value (fuses are read-only through this path, as on the chip)."""
        if addr not in self._fuses:
            self._written[addr] = value

"""`fleet discover`: the serial boards plugged into this host, identified, as fleet entries.

Ports come from pyserial's list_ports (`list_ports()`, the one place that asks the OS), filtered to the USB
bridges ESP boards use. Each board is identified without a flash write: when MicroPython answers its REPL,
its version is read and `machine.bootloader()` puts it into the ROM loader (works on any port, with or
without DTR/RTS); otherwise esptool's DTR/RTS reset does. esptool reads chip, MAC and flash size, then the
board boots its firmware again. A board whose chip is a registered kind's (`Kind.chip`) becomes a
`[[device]]` entry; `--write FILE` appends the new ones, skipping boards already listed (by MAC).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serial.tools import list_ports as _list_ports

from bench.config.fleet import load_fleet
from bench.config.kinds import KINDS, USB_SERIAL_JTAG
from bench.core.errors import ConfigError
from bench.core.folders import write_file
from bench.devices.esptool_link import identify_chip
from bench.devices.mpremote_deploy import micropython_version, request_bootloader

USB_SERIAL_JTAG_ID = (0x303A, 0x1001)
# USB VID:PID of the serial bridges ESP boards carry
BRIDGES: dict[tuple[int, int], str] = {
    USB_SERIAL_JTAG_ID: "Espressif USB-Serial-JTAG",
    (0x10C4, 0xEA60): "Silicon Labs CP210x",
    (0x10C4, 0xEA70): "Silicon Labs CP2105",
    (0x1A86, 0x7523): "WCH CH340",
    (0x1A86, 0x55D3): "WCH CH343",
    (0x1A86, 0x55D4): "WCH CH9102",
    (0x0403, 0x6001): "FTDI FT232R",
    (0x0403, 0x6010): "FTDI FT2232",
    (0x0403, 0x6014): "FTDI FT232H",
    (0x0403, 0x6015): "FTDI FT-X",
}
REPL_BAUD = 115200


def list_ports() -> list[Any]:
    """The host's serial ports (pyserial's ListPortInfo objects)."""
    return list(_list_ports.comports())


@dataclass
class FoundBoard:
    """One serial board and what identifying it found."""

    port: str
    bridge: str
    vid: int
    pid: int
    usb_serial: str | None = None
    chip: str | None = None
    mac: str | None = None
    flash_size: int | None = None
    micropython: str | None = None
    kind: str | None = None  # the registered kind with this chip, if any
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**self.__dict__, "usb_id": f"{self.vid:04x}:{self.pid:04x}"}

    @property
    def usb_serial_jtag(self) -> bool:
        """True for the chip's own USB-Serial-JTAG (esptool resets it with its USB sequence)."""
        return (self.vid, self.pid) == USB_SERIAL_JTAG_ID

    def name(self) -> str:
        """A fleet name from the kind and the MAC's last three bytes, e.g. `esp32c6-c63003`."""
        tail = (self.mac or "").replace(":", "")[-6:]
        return f"{self.kind or 'board'}-{tail}"


def candidate_ports() -> list[FoundBoard]:
    """The ports whose USB bridge is one ESP boards use."""
    found = []
    for info in list_ports():
        key = (info.vid, info.pid)
        if key in BRIDGES:
            found.append(FoundBoard(info.device, BRIDGES[key], info.vid, info.pid, info.serial_number or None))
    return found


def identify(board: FoundBoard) -> FoundBoard:
    """Fill in chip, MAC, flash size and MicroPython version (blocking; errors go to `board.error`)."""
    board.micropython = micropython_version(board.port, REPL_BAUD)
    try:
        if board.micropython is not None and request_bootloader(board.port, REPL_BAUD):
            chip = identify_chip(board.port, reset=False)  # MicroPython put it in the loader; it reboots back
        else:
            chip = identify_chip(board.port, reset=True, usb_serial_jtag=board.usb_serial_jtag)  # esptool's resets
    except Exception as exc:  # esptool raises FatalError, SerialException, OSError...
        text = str(exc).strip().splitlines()
        board.error = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        return board
    board.chip, board.mac, board.flash_size = chip.chip, chip.mac, chip.flash_size
    board.kind = next((k.name for k in KINDS.values() if k.chip and k.chip == chip.chip), None)
    return board


async def discover() -> list[FoundBoard]:
    """Identify every candidate port, all at once (each in its own thread)."""
    return list(await asyncio.gather(*(asyncio.to_thread(identify, b) for b in candidate_ports())))


def fleet_entry(board: FoundBoard, name: str) -> str:
    """A `[[device]]` table for `board` (a supported kind, identified)."""
    lines = [
        f"# {board.chip} on {board.bridge} ({board.vid:04x}:{board.pid:04x})"
        + (f", MicroPython {board.micropython}" if board.micropython else ", no MicroPython answered"),
        "[[device]]",
        f'name = "{name}"',
        f'kind = "{board.kind}"',
        f'port = "{board.port}"',
        f'mac = "{board.mac}"',
    ]
    if board.usb_serial:
        lines.append(f'usb_serial = "{board.usb_serial}"')
    if board.usb_serial_jtag:
        lines.append(f'usb = "{USB_SERIAL_JTAG}"')
    if board.flash_size:
        lines.append(f"flash_size = {board.flash_size}")
    return "\n".join(lines) + "\n"


def _norm_mac(mac: str) -> str:
    return re.sub(r"[^0-9a-f]", "", mac.lower())


def new_entries(
    boards: list[FoundBoard], existing: Path | None = None
) -> tuple[list[tuple[FoundBoard, str]], list[FoundBoard]]:
    """(board, entry text) for each supported board not already in `existing` (by MAC), names made unique;
    and the boards left out because the fleet file already lists them."""
    macs: set[str] = set()
    names: set[str] = set()
    if existing is not None and existing.exists():
        fleet = load_fleet(existing)
        macs = {_norm_mac(d.mac) for d in fleet if d.mac}
        names = {d.name for d in fleet}
    entries, known = [], []
    for board in boards:
        if board.kind is None or board.mac is None:
            continue
        if _norm_mac(board.mac) in macs:
            known.append(board)
            continue
        name, n = board.name(), 2
        while name in names:
            name, n = f"{board.name()}-{n}", n + 1
        names.add(name)
        macs.add(_norm_mac(board.mac))
        entries.append((board, fleet_entry(board, name)))
    return entries, known


def append_entries(path: Path, entries: list[str]) -> None:
    """Add `entries` to the fleet file at `path` (created when missing); the result must load."""
    before = path.read_text(encoding="utf-8") if path.exists() else "# Fleet written by `hilbench fleet discover`\n"
    text = before.rstrip("\n") + "\n" + "".join("\n" + e for e in entries)
    write_file(path, text, what="fleet folder")
    try:
        load_fleet(path)
    except ConfigError:
        write_file(path, before, what="fleet folder")
        raise

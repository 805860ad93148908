"""The virtual ESP32-C6's loader protocol, registers and reset circuit, piece by piece."""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
import zlib
from pathlib import Path

import pytest
from esp_pylib.serial_reset import usb_jtag_bootloader_reset
from esptool.targets.esp32c6 import ESP32C6ROM

from bench.config.kinds import UART_BRIDGE, USB_SERIAL_JTAG
from bench.devices.esp_image import xor_checksum
from bench.virtual.esp32c6.board import Board, BoardConfig, Mode
from bench.virtual.esp32c6.efuse import Efuses, RegisterFile, parse_mac
from bench.virtual.esp32c6.flash import FILESYSTEM_OFFSET, FlashStorage, SpiFlashController
from bench.virtual.esp32c6.rom import SYNC_PAYLOAD, Op, RomLoader
from bench.virtual.esp32c6.slip import SlipDecoder, slip_encode

MAC = parse_mac("60:55:f9:c6:00:01")


def test_slip_round_trip_with_escapes_split_anywhere() -> None:
    payloads = [b"\xc0\xdb\x00\xc0", b"plain", bytes(range(256))]
    stream = b"noise" + b"".join(slip_encode(p) for p in payloads)
    for cut in (1, 3, 7, len(stream) // 2):
        decoder = SlipDecoder()
        frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert frames == payloads


@pytest.fixture
def loader(tmp_path: Path) -> RomLoader:
    flash = FlashStorage(tmp_path / "flash.bin", 4 * 1024 * 1024, tmp_path / "fs")
    return RomLoader(flash, RegisterFile(Efuses(MAC)), SpiFlashController(flash))


def request(op: int, data: bytes = b"", check: int = 0) -> bytes:
    return struct.pack("<BBHI", 0, op, len(data), check) + data


def response(frame: bytes) -> tuple[int, int, bytes]:
    _, op, length, value = struct.unpack_from("<BBHI", frame)
    return op, value, frame[8 : 8 + length]


def test_rom_then_stub_dialect(loader: RomLoader) -> None:
    sync = loader.handle(request(Op.SYNC, SYNC_PAYLOAD)).frames
    assert len(sync) == 8 and response(sync[0])[1] != 0 and response(sync[0])[2] == b"\0\0\0\0"
    for frame in (request(Op.MEM_BEGIN, bytes(16)), request(Op.MEM_DATA, struct.pack("<IIII", 4, 0, 0, 0) + b"abcd",
                                                                          xor_checksum(b"abcd"))):  # fmt: skip
        assert response(loader.handle(frame).frames[0])[2] == b"\0\0\0\0"
    end = loader.handle(request(Op.MEM_END, struct.pack("<II", 0, 0x40800000))).frames
    assert end[1] == b"OHAI"
    sync = loader.handle(request(Op.SYNC, SYNC_PAYLOAD)).frames
    assert response(sync[0])[1] == 0 and response(sync[0])[2] == b"\0\0"  # stub: value 0, two status bytes


def test_compressed_write_spans_blocks_and_md5_matches(loader: RomLoader) -> None:
    data = os.urandom(20000) + bytes(20000)
    packed = zlib.compress(data)
    loader.handle(request(Op.FLASH_DEFL_BEGIN, struct.pack("<IIIII", len(data), 3, 0x4000, 0x10000, 0)))
    for seq, start in enumerate(range(0, len(packed), 0x4000)):
        block = packed[start : start + 0x4000]
        reply = loader.handle(request(Op.FLASH_DEFL_DATA, struct.pack("<IIII", len(block), seq, 0, 0) + block,
                                      xor_checksum(block)))  # fmt: skip
        assert response(reply.frames[0])[2][0] == 0
    assert loader.flash.read(0x10000, len(data)) == data
    md5 = loader.handle(request(Op.SPI_FLASH_MD5, struct.pack("<IIII", 0x10000, len(data), 0, 0))).frames[0]
    assert response(md5)[2][:32] == hashlib.md5(data).hexdigest().encode()  # the ROM answers in hex


def test_bad_checksum_and_unknown_commands_are_refused(loader: RomLoader) -> None:
    loader.handle(request(Op.FLASH_BEGIN, struct.pack("<IIIII", 16, 1, 16, 0, 0)))
    bad = loader.handle(request(Op.FLASH_DATA, struct.pack("<IIII", 16, 0, 0, 0) + b"x" * 16, 0x00)).frames[0]
    assert response(bad)[2][:2] == b"\x01\x07"
    unknown = loader.handle(request(Op.ERASE_FLASH)).frames[0]  # stub-only: the ROM refuses it
    assert response(unknown)[2][:2] == b"\x01\x05"


def test_stub_read_flash_streams_sectors_acknowledged_by_the_host(loader: RomLoader) -> None:
    data = os.urandom(3 * 4096 + 100)
    loader.flash.write(0x2000, data)
    loader.stub = True
    reply = loader.handle(request(Op.READ_FLASH, struct.pack("<IIII", 0x2000, len(data), 4096, 2)))
    got, frames = b"", reply.frames[1:]
    assert len(frames) == 2  # two packets in flight until acknowledged
    while True:
        for frame in frames:
            if len(got) == len(data):
                assert frame == hashlib.md5(data).digest()
                return
            got += frame
        frames = loader.handle(struct.pack("<I", len(got))).frames


def test_fuses_decode_to_the_mac_with_esptools_own_code(loader: RomLoader) -> None:
    chip = ESP32C6ROM.__new__(ESP32C6ROM)
    chip.read_reg = loader.registers.read
    assert bytes(chip.read_mac()) == MAC
    assert chip.get_chip_revision() == 1  # v0.1


def test_flash_id_and_sfdp_through_the_spi_registers(loader: RomLoader) -> None:
    spi = loader.spi
    spi.write(spi.USR2, (7 << 28) | 0x9F)
    spi.write(spi.CMD, spi.CMD_USR)
    assert spi.read(spi.CMD) & spi.CMD_USR == 0
    assert spi.read(spi.W0) == 0x1640EF  # 4 MB Winbond
    spi.write(spi.USR2, (7 << 28) | 0x5A)
    spi.write(spi.ADDR, 0)
    spi.write(spi.CMD, spi.CMD_USR)
    assert spi.read(spi.W0).to_bytes(4, "little") == b"SFDP"


def test_writes_reaching_the_filesystem_partition_wipe_it(loader: RomLoader) -> None:
    (loader.flash.fs_dir / "main.py").write_text("print(1)")
    loader.flash.write(0x1000, b"app")
    assert (loader.flash.fs_dir / "main.py").exists()
    loader.flash.erase(FILESYSTEM_OFFSET, 4096)
    assert not any(loader.flash.fs_dir.iterdir())


def test_classic_auto_reset_straps_download_mode_and_hard_reset_boots(tmp_path: Path) -> None:
    async def scenario() -> None:
        board = Board(BoardConfig("u", tmp_path, MAC, flash_size=4 * 1024 * 1024))
        uart = bytearray()
        board.attach(uart.extend)
        await board.power_on()
        await asyncio.sleep(0.05)
        assert board.mode is Mode.BOOT_LOOP  # blank flash
        board.set_lines(True, False)  # a client opens the port: DTR then RTS asserted, no reset
        board.set_lines(True, True)
        assert board.mode is Mode.BOOT_LOOP
        board.set_lines(False, True)  # esptool ClassicReset: EN low...
        assert board.mode is Mode.RESET
        await asyncio.sleep(0.1)
        board.set_lines(True, True)  # ...EN rises (over RFC 2217 the boot pin follows ~50 ms later)...
        await asyncio.sleep(0.05)
        board.set_lines(True, False)  # ...IO9 low: latched
        await asyncio.sleep(0.05)
        board.set_lines(False, False)
        assert board.mode is Mode.DOWNLOAD and uart.endswith(b"waiting for download\r\n")
        board.set_lines(False, True)  # hard reset via RTS
        await asyncio.sleep(0.1)
        board.set_lines(False, False)
        await asyncio.sleep(0.4)
        assert board.mode is Mode.BOOT_LOOP
        await board.close()

    asyncio.run(scenario())


class _LinePort:
    """What esp_pylib's reset sequences drive (pyserial's setDTR/setRTS) from their thread, wired to a board."""

    def __init__(self, board: Board, loop: asyncio.AbstractEventLoop) -> None:
        self.board = board
        self.loop = loop
        self.dtr = self.rts = False

    def setDTR(self, state: bool) -> None:
        self.dtr = state
        self.loop.call_soon_threadsafe(self.board.set_lines, self.dtr, self.rts)

    def setRTS(self, state: bool) -> None:
        self.rts = state
        self.loop.call_soon_threadsafe(self.board.set_lines, self.dtr, self.rts)


@pytest.mark.parametrize("usb", [UART_BRIDGE, USB_SERIAL_JTAG])
def test_usb_jtag_reset_sequence_reaches_the_rom_only_through_the_chips_own_usb(tmp_path: Path, usb: str) -> None:
    """esptool's USBJTAGSerialReset (esp_pylib `usb_jtag_bootloader_reset`), run as esptool runs it."""

    async def scenario() -> tuple[Mode, bytes]:
        board = Board(BoardConfig("u", tmp_path, MAC, flash_size=4 * 1024 * 1024, usb=usb))
        uart = bytearray()
        board.attach(uart.extend)
        await board.power_on()
        await asyncio.sleep(0.05)
        port = _LinePort(board, asyncio.get_running_loop())
        await asyncio.to_thread(usb_jtag_bootloader_reset, port, 0.06)
        await asyncio.sleep(0.4)  # past the bridge's boot-pin latch
        mode = board.mode
        await board.close()
        return mode, bytes(uart)

    mode, uart = asyncio.run(scenario())
    if usb == USB_SERIAL_JTAG:
        assert mode is Mode.DOWNLOAD
        assert uart.endswith(
            b"rst:0x15 (USB_UART_HPSYS),boot:0x5 (DOWNLOAD(USB/UART/SDIO_REI_FEO))\r\n"
            b"Saved PC:0x4001975a\r\nwaiting for download\r\n"
        )
    else:  # the bridge's circuit sees EN pulsed with IO9 high: the chip boots from flash (blank: boot loop)
        assert mode is Mode.BOOT_LOOP


def test_usb_serial_jtag_hard_reset_boots_from_flash_and_an_open_port_does_not_reset(tmp_path: Path) -> None:
    async def scenario() -> None:
        board = Board(BoardConfig("u", tmp_path, MAC, flash_size=4 * 1024 * 1024, usb=USB_SERIAL_JTAG))
        await board.reset(download=True)
        await asyncio.sleep(0.05)
        board.set_lines(True, False)  # pyserial opens the port: DTR, then RTS
        board.set_lines(True, True)
        assert board.mode is Mode.DOWNLOAD  # no reset: the download flag alone does nothing
        board.set_lines(False, False)
        board.set_lines(False, True)  # esptool HardReset(uses_usb=True): RTS without DTR, 0.2 s, release
        assert board.mode is Mode.RESET
        board.set_lines(False, False)
        await asyncio.sleep(0.3)
        assert board.mode is Mode.BOOT_LOOP  # the flag was cleared: boot from (blank) flash
        await board.close()

    asyncio.run(scenario())

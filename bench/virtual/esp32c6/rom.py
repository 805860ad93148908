"""The ESP32-C6 serial download protocol: the ROM loader's commands and, after the stub upload, the stub's.

Pure request/response logic: `RomLoader.handle(frame)` takes one decoded SLIP frame and returns a
`Reply` (frames to send, and what the board should do next). The board does the I/O and the pacing.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass, field

from bench.devices.esp_image import ESP32C6_CHIP_ID, xor_checksum
from bench.virtual.esp32c6.efuse import RegisterFile
from bench.virtual.esp32c6.flash import SECTOR, FlashStorage, SpiFlashController

REQUEST = struct.Struct("<BBHI")  # direction 0, op, length, checksum
RESPONSE = struct.Struct("<BBHI")  # direction 1, op, length, value
SYNC_PAYLOAD = b"\x07\x07\x12\x20" + b"\x55" * 32
ROM_SYNC_VALUE = 0x20120707  # any non-zero value says "ROM"; the stub answers 0


class Op(enum.IntEnum):
    """Command opcodes (ROM, then stub-only ones)."""

    FLASH_BEGIN = 0x02
    FLASH_DATA = 0x03
    FLASH_END = 0x04
    MEM_BEGIN = 0x05
    MEM_END = 0x06
    MEM_DATA = 0x07
    SYNC = 0x08
    WRITE_REG = 0x09
    READ_REG = 0x0A
    SPI_SET_PARAMS = 0x0B
    SPI_ATTACH = 0x0D
    READ_FLASH_SLOW = 0x0E
    CHANGE_BAUDRATE = 0x0F
    FLASH_DEFL_BEGIN = 0x10
    FLASH_DEFL_DATA = 0x11
    FLASH_DEFL_END = 0x12
    SPI_FLASH_MD5 = 0x13
    GET_SECURITY_INFO = 0x14
    ERASE_FLASH = 0xD0
    ERASE_REGION = 0xD1
    READ_FLASH = 0xD2
    RUN_USER_CODE = 0xD3


class Err(enum.IntEnum):
    """Error codes in the status bytes."""

    INVALID_MESSAGE = 0x05
    FAILED = 0x06
    BAD_CHECKSUM = 0x07
    BAD_DATA_LEN = 0x09
    INFLATE = 0x0B
    NOT_ENOUGH_DATA = 0x0C
    TOO_MUCH_DATA = 0x0D


class After(enum.Enum):
    """What the board does once the reply frames are sent."""

    NOTHING = "nothing"
    RUN_APP = "run-app"  # leave the loader, boot from flash
    REBOOT = "reboot"  # full reset, boot per the strapping pins


@dataclass
class Reply:
    """Frames to send (unencoded payloads) and the follow-up action."""

    frames: list[bytes] = field(default_factory=list)
    after: After = After.NOTHING
    new_baud: int | None = None  # switch the simulated line speed after sending


class ProtocolError(Exception):
    """A command failed; carries the ROM error code."""

    def __init__(self, code: Err, why: str = "") -> None:
        super().__init__(why or code.name)
        self.code = code


@dataclass
class _WriteSession:
    offset: int
    compressed: bool
    written: int = 0
    inflater: zlib._Decompress | None = None


@dataclass
class _ReadStream:
    offset: int
    length: int
    packet: int
    max_inflight: int
    sent: int = 0
    acked: int = 0


class RomLoader:
    """Command handling of the ROM loader, switching to the stub dialect after a stub upload."""

    def __init__(self, flash: FlashStorage, registers: RegisterFile, spi: SpiFlashController) -> None:
        self.flash = flash
        self.registers = registers
        self.spi = spi
        self.stub = False
        self.log: list[str] = []
        self._write: _WriteSession | None = None
        self._mem_blocks: list[bytes] = []
        self._read: _ReadStream | None = None

    # -- framing ---------------------------------------------------------------------------------

    def _respond(self, op: int, value: int = 0, data: bytes = b"", error: Err | None = None) -> bytes:
        status = bytes([1 if error else 0, int(error or 0)]) + (b"" if self.stub else b"\0\0")
        body = data + status
        return RESPONSE.pack(1, op, len(body), value) + body

    def handle(self, frame: bytes) -> Reply:
        """Process one SLIP frame from the host."""
        if self._read is not None:
            return self._read_ack(frame)
        if len(frame) < REQUEST.size or frame[0] != 0:
            return Reply()  # noise: the ROM ignores what is not a request
        _, op, length, check = REQUEST.unpack_from(frame)
        data = frame[REQUEST.size : REQUEST.size + length]
        try:
            return self._dispatch(op, data, check)
        except ProtocolError as exc:
            self.log.append(f"op 0x{op:02x} failed: {exc}")
            if op == Op.FLASH_DEFL_DATA or op == Op.FLASH_DATA:
                self._write = None
            return Reply([self._respond(op, error=exc.code)])
        except struct.error:
            return Reply([self._respond(op, error=Err.BAD_DATA_LEN)])

    def _dispatch(self, op: int, data: bytes, check: int) -> Reply:
        if op == Op.SYNC:
            if data != SYNC_PAYLOAD:
                raise ProtocolError(Err.INVALID_MESSAGE, "bad sync payload")
            value = 0 if self.stub else ROM_SYNC_VALUE
            return Reply([self._respond(op, value)] * 8)
        if op == Op.READ_REG:
            (addr,) = struct.unpack_from("<I", data)
            value = self.spi.read(addr) if self.spi.owns(addr) else self.registers.read(addr)
            return Reply([self._respond(op, value)])
        if op == Op.WRITE_REG:
            addr, value, mask, _ = struct.unpack_from("<IIII", data)
            target = self.spi if self.spi.owns(addr) else self.registers
            if mask != 0xFFFFFFFF:
                value = (target.read(addr) & ~mask) | (value & mask)
            target.write(addr, value)
            return Reply([self._respond(op)])
        if op in (Op.SPI_ATTACH, Op.SPI_SET_PARAMS):
            return Reply([self._respond(op)])
        if op == Op.GET_SECURITY_INFO:
            info = struct.pack("<IBBBBBBBBII", 0, 0, 0, 0, 0, 0, 0, 0, 0, ESP32C6_CHIP_ID, 0)
            return Reply([self._respond(op, data=info)])
        if op == Op.CHANGE_BAUDRATE:
            new_baud, _ = struct.unpack_from("<II", data)
            return Reply([self._respond(op)], new_baud=new_baud)
        if op in (Op.FLASH_BEGIN, Op.FLASH_DEFL_BEGIN):
            return self._flash_begin(op, data)
        if op in (Op.FLASH_DATA, Op.FLASH_DEFL_DATA):
            return self._flash_data(op, data, check)
        if op in (Op.FLASH_END, Op.FLASH_DEFL_END):
            return self._flash_end(op, data)
        if op == Op.SPI_FLASH_MD5:
            offset, size, _, _ = struct.unpack_from("<IIII", data)
            self._check_range(offset, size)
            digest = self.flash.md5(offset, size)
            return Reply([self._respond(op, data=digest if self.stub else digest.hex().encode())])
        if op == Op.READ_FLASH_SLOW and not self.stub:
            offset, size = struct.unpack_from("<II", data)
            self._check_range(offset, min(size, 64))
            block = self.flash.read(offset, min(size, 64))
            return Reply([self._respond(op, data=block.ljust(64, b"\xff"))])
        if op == Op.MEM_BEGIN:
            self._mem_blocks = []
            return Reply([self._respond(op)])
        if op == Op.MEM_DATA:
            length, _, _, _ = struct.unpack_from("<IIII", data)
            block = data[16 : 16 + length]
            if xor_checksum(block) != check:
                raise ProtocolError(Err.BAD_CHECKSUM)
            self._mem_blocks.append(block)
            return Reply([self._respond(op)])
        if op == Op.MEM_END:
            execute, entry = struct.unpack_from("<II", data)
            reply = Reply([self._respond(op)])
            if execute == 0 and entry and not self.stub:
                # The uploaded code is the flasher stub: it greets, then speaks the stub dialect.
                self.stub = True
                self.log.append(f"stub started ({sum(map(len, self._mem_blocks))} bytes at 0x{entry:08x})")
                reply.frames.append(b"OHAI")
            return reply
        if self.stub and op == Op.ERASE_FLASH:
            self.flash.erase_all()
            self.log.append("chip erased")
            return Reply([self._respond(op)])
        if self.stub and op == Op.ERASE_REGION:
            offset, size = struct.unpack_from("<II", data)
            if offset % SECTOR or size % SECTOR:
                raise ProtocolError(Err.FAILED, "erase region not sector aligned")
            self._check_range(offset, size)
            self.flash.erase(offset, size)
            return Reply([self._respond(op)])
        if self.stub and op == Op.READ_FLASH:
            offset, size, packet, inflight = struct.unpack_from("<IIII", data)
            self._check_range(offset, size)
            self._read = _ReadStream(offset, size, packet, max(1, inflight))
            return Reply([self._respond(op), *self._read_packets()])
        if self.stub and op == Op.RUN_USER_CODE:
            return Reply(after=After.RUN_APP)
        raise ProtocolError(Err.INVALID_MESSAGE, f"unsupported command 0x{op:02x}")

    def _check_range(self, offset: int, size: int) -> None:
        if not self.flash.check_range(offset, size):
            raise ProtocolError(Err.FAILED, f"0x{offset:x}+0x{size:x} is outside the flash")

    # -- flash writes ----------------------------------------------------------------------------

    def _flash_begin(self, op: int, data: bytes) -> Reply:
        size, _, _, offset = struct.unpack_from("<IIII", data)
        compressed = op == Op.FLASH_DEFL_BEGIN
        if size:  # the uncompressed size (stub) or the erase size rounded to blocks (ROM): erase it now
            end = min(self.flash.size, -(-(offset + size) // SECTOR) * SECTOR)
            start = offset - offset % SECTOR
            self._check_range(start, end - start)
            self.flash.erase(start, end - start)
        inflater = zlib.decompressobj() if compressed else None
        self._write = _WriteSession(offset, compressed, inflater=inflater)
        self.log.append(f"flash begin 0x{offset:x} size 0x{size:x}{' (compressed)' if compressed else ''}")
        return Reply([self._respond(op)])

    def _flash_data(self, op: int, data: bytes, check: int) -> Reply:
        session = self._write
        if session is None or session.compressed != (op == Op.FLASH_DEFL_DATA):
            raise ProtocolError(Err.FAILED, "data without a matching begin")
        length, _, _, _ = struct.unpack_from("<IIII", data)
        block = data[16 : 16 + length]
        if len(block) != length:
            raise ProtocolError(Err.NOT_ENOUGH_DATA)
        if xor_checksum(block) != check:
            raise ProtocolError(Err.BAD_CHECKSUM)
        if session.inflater is not None:
            try:
                block = session.inflater.decompress(block)
            except zlib.error as exc:
                raise ProtocolError(Err.INFLATE, str(exc)) from None
        where = session.offset + session.written
        block = block[: max(0, self.flash.size - where)]
        self.flash.write(where, block)
        session.written += len(block)
        return Reply([self._respond(op)])

    def _flash_end(self, op: int, data: bytes) -> Reply:
        (stay,) = struct.unpack_from("<I", data) if data else (1,)
        self._write = None
        reply = Reply([self._respond(op)])
        if not self.stub:
            reply.after = After.RUN_APP if stay else After.REBOOT
        elif not stay:
            reply.after = After.REBOOT
        return reply

    # -- stub READ_FLASH stream ------------------------------------------------------------------

    def _read_packets(self) -> list[bytes]:
        stream = self._read
        assert stream is not None
        frames = []
        while stream.sent < stream.length and stream.sent - stream.acked < stream.max_inflight * stream.packet:
            size = min(stream.packet, stream.length - stream.sent)
            frames.append(self.flash.read(stream.offset + stream.sent, size))
            stream.sent += size
        return frames

    def _read_ack(self, frame: bytes) -> Reply:
        stream = self._read
        assert stream is not None
        if len(frame) == 4:
            stream.acked = max(stream.acked, struct.unpack("<I", frame)[0])
        frames = self._read_packets()
        if stream.acked >= stream.length:
            self._read = None
            frames.append(self.flash.md5(stream.offset, stream.length))
        return Reply(frames)

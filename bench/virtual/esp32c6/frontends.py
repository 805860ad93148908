"""Ways to reach a virtual board's UART: RFC 2217 (with DTR/RTS auto-reset), raw TCP (socket://), a pty.
Each admits whom a real board's `/dev/ttyACM0` would (root, the bench's user, group dialout): the TCP ports
by asking the kernel who the peer is (bench.virtual.port_access), the pty by its file's owner and mode."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable

from serial import rfc2217

from bench.virtual import port_access
from bench.virtual.esp32c6.board import Board

IAC = 0xFF
OUTPUT_MAX = 1024 * 1024  # UART output waiting for a client that does not read it; past this it is lost, as on a UART


class _VirtualPort:
    """The "serial port" an RFC 2217 PortManager configures: modem lines go to the board's reset circuit."""

    def __init__(self, board: Board, flush: Callable[[], None]) -> None:
        self._board = board
        self._flush = flush
        self._dtr = False
        self._rts = False
        self.baudrate = 115200
        self.bytesize = 8
        self.parity = "N"
        self.stopbits = 1
        self.xonxoff = False
        self.rtscts = False
        self.break_condition = False
        self.cts = self.dsr = self.ri = self.cd = False

    @property
    def dtr(self) -> bool:
        return self._dtr

    @dtr.setter
    def dtr(self, value: bool) -> None:
        self._set_lines(value, self._rts)

    @property
    def rts(self) -> bool:
        return self._rts

    @rts.setter
    def rts(self, value: bool) -> None:
        self._set_lines(self._dtr, value)

    def _set_lines(self, dtr: bool, rts: bool) -> None:
        """Drive the modem lines, after the output that came before the change."""
        self._flush()
        self._dtr, self._rts = bool(dtr), bool(rts)
        self._board.set_lines(self._dtr, self._rts)

    def reset_input_buffer(self) -> None:
        """Nothing is buffered on this side."""

    def reset_output_buffer(self) -> None:
        """Nothing is buffered on this side."""


class _WriterConnection:
    """What PortManager writes its telnet replies to."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        """A telnet reply; lost past OUTPUT_MAX waiting (a client that negotiates and never reads)."""
        if not self._writer.is_closing() and self._writer.transport.get_write_buffer_size() <= OUTPUT_MAX:
            self._writer.write(data)


async def _serve_client(board: Board, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rfc: bool) -> None:
    pending = bytearray()

    def flush() -> None:
        if pending:
            board.feed(bytes(pending))
            pending.clear()

    manager = rfc2217.PortManager(_VirtualPort(board, flush), _WriterConnection(writer)) if rfc else None

    def sink(data: bytes) -> None:
        if writer.is_closing() or writer.transport.get_write_buffer_size() > OUTPUT_MAX:
            return
        if manager is not None and IAC in data:
            data = b"".join(manager.escape(data))
        writer.write(data)

    board.attach(sink)
    try:
        while data := await reader.read(65536):
            if manager is None:
                pending += data
            else:
                _telnet_filter(manager, data, pending)
            flush()
            await board.input_room()  # read on only when the chip has room: a client that sends faster waits
    except (ConnectionError, OSError):
        pass
    finally:
        board.detach(sink)
        if rfc:
            board.release_lines()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _telnet_filter(manager: rfc2217.PortManager, data: bytes, out: bytearray) -> None:
    """Append the serial data in `data` to `out`; telnet/RFC 2217 commands go through `manager` (which may
    change modem lines, flushing `out` first). Runs of plain data are copied without the per-byte state machine."""
    pos = 0
    while pos < len(data):
        if manager.mode == rfc2217.M_NORMAL and manager.suboption is None:  # plain data until the next IAC
            nxt = data.find(b"\xff", pos)
            if nxt < 0:
                out += data[pos:]
                return
            out += data[pos:nxt]
            pos = nxt
        for byte in manager.filter(data[pos : pos + 1]):
            out += byte
        pos += 1


async def start_tcp(board: Board, host: str, *, rfc2217_mode: bool) -> asyncio.Server:
    """A TCP server on a free port: RFC 2217 (modem lines honoured) or raw bytes."""

    gate = port_access.Gate(port_access.remote_allowed(host), lambda line: print(line, file=sys.stderr, flush=True))
    what = "rfc2217" if rfc2217_mode else "socket"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        verdict = await gate.admit(peer, local, what)
        if not verdict.admitted:
            if not rfc2217_mode:  # a raw port's user sees why (RFC 2217 clients expect telnet, not text)
                writer.write(f"permission denied: this board's port admits {port_access.RULE}\r\n".encode())
            writer.close()
            return
        await _serve_client(board, reader, writer, rfc2217_mode)

    return await asyncio.start_server(handle, host, 0)


class PtyFrontEnd:
    """A pseudo-terminal whose slave path any serial tool can open; raw mode (no \\r\\n rewriting)."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.master, self.slave, self.path = port_access.open_serial_pty()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.master, self._read)
        self._waiting: asyncio.Task[None] | None = None
        board.attach(self._write)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except (BlockingIOError, OSError):
            return
        if data:
            self.board.feed(data)
            self._loop.remove_reader(self.master)  # read on when the chip has room (the pty's buffer holds the rest)
            self._waiting = asyncio.ensure_future(self._read_on())

    async def _read_on(self) -> None:
        await self.board.input_room()
        self._loop.add_reader(self.master, self._read)

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(BlockingIOError, OSError):  # nobody reading: the bytes are lost, as on a UART
            os.write(self.master, data)

    def close(self) -> None:
        """Remove the pty."""
        self.board.detach(self._write)
        if self._waiting is not None:
            self._waiting.cancel()
        self._loop.remove_reader(self.master)
        os.close(self.master)
        os.close(self.slave)


def url_of(server: asyncio.Server, scheme: str) -> str:
    """`scheme://host:port` of a listening server."""
    host, port = server.sockets[0].getsockname()[:2]
    return f"{scheme}://{host}:{port}"

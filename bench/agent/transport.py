"""Async line transports to an agent: TCP streams, a subprocess's stdin/stdout, a pyserial URL.

Every transport offers `send(bytes)`, `readline() -> bytes` (b"" at end of stream) and `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path
from typing import Protocol

import serial

from bench.agent.wire import MAX_LINE
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.folders import open_append
from bench.core.procs import tied
from bench.links.spec import DEFAULT_BAUD

READ_LIMIT = 4 * MAX_LINE  # asyncio stream buffer; longer console lines are cut, never fatal


class LineTransport(Protocol):
    """A bidirectional byte stream carrying protocol lines and console text."""

    name: str

    async def send(self, data: bytes) -> None:
        """Write bytes (one or more complete lines)."""

    async def readline(self) -> bytes:
        """The next line including its newline; b"" when the stream has ended."""

    async def close(self) -> None:
        """Release the stream (idempotent)."""


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError:  # a line over the buffer limit (the stream dropped it): reported as console text
        return b"[bench] a line over %d bytes was dropped\n" % READ_LIMIT
    except (ConnectionError, OSError):
        return b""


class StreamTransport:
    """A pair of asyncio streams: TCP (`connect`), or any reader/writer pair."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        self.reader = reader
        self.writer = writer
        self.name = name

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float = 5.0) -> StreamTransport:
        """Connect over TCP, or raise DeviceUnreachable naming the address."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=READ_LIMIT), timeout=timeout
            )
        except (OSError, TimeoutError) as exc:
            raise DeviceUnreachable(f"agent at tcp://{host}:{port}: cannot connect: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, f"tcp://{host}:{port}")

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise DeviceUnreachable(f"agent at {self.name}: write failed: {exc}") from None

    async def readline(self) -> bytes:
        return await _readline(self.reader)

    async def close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


class ProcessTransport(StreamTransport):
    """An agent run as a local subprocess, speaking on its stdin/stdout (stderr goes to `stderr_path`): the
    streams are its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        super().__init__(proc.stdout, proc.stdin, name)
        self.proc = proc

    @classmethod
    async def spawn(
        cls,
        argv: list[str],
        *,
        cwd: str | Path | None = None,
        env: dict[str, str] | None = None,
        stderr_path: Path | None = None,
    ) -> ProcessTransport:
        """Start `argv` with pipes on stdin/stdout."""
        stderr = open_append(stderr_path, binary=True) if stderr_path else asyncio.subprocess.DEVNULL
        try:
            proc = await asyncio.create_subprocess_exec(
                *tied(argv),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                limit=READ_LIMIT,
            )
        except OSError as exc:
            raise DeviceUnreachable(f"agent process {argv[0]}: cannot start: {exc}") from None
        finally:
            if stderr_path:
                stderr.close()
        return cls(proc, f"exec:{' '.join(argv)}")

    async def close(self, grace: float = 3.0) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                self.writer.close()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()


class SerialTransport:
    """A pyserial URL (a port path, rfc2217://, socket://, loop://) served by a reader thread."""

    def __init__(self, port: serial.SerialBase, name: str) -> None:
        self.port = port
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._reader, name=f"serial-{name}", daemon=True)
        self.thread.start()

    @classmethod
    async def open(cls, url: str, baud: int = DEFAULT_BAUD) -> SerialTransport:
        """Open the port (in a thread: rfc2217 negotiation blocks), or raise DeviceUnreachable."""

        def _open() -> serial.SerialBase:
            # pyserial's RFC 2217 client has no write timeout (it raises NotImplementedError)
            write_timeout = None if url.startswith("rfc2217://") else 5
            return serial.serial_for_url(url, baudrate=baud, timeout=0.05, write_timeout=write_timeout)

        try:
            port = await asyncio.to_thread(_open)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise DeviceUnreachable(f"agent on serial {url}: cannot open: {exc}") from None
        return cls(port, url)

    def _reader(self) -> None:
        buf = b""
        while not self.closed.is_set():
            try:
                chunk = self.port.read(self.port.in_waiting or 1)
            except (serial.SerialException, OSError, TypeError, AttributeError):
                break
            if not chunk:
                continue
            buf += chunk
            while (nl := buf.find(b"\n")) >= 0:
                line, buf = buf[: nl + 1], buf[nl + 1 :]
                self.loop.call_soon_threadsafe(self.lines.put_nowait, line)
            if len(buf) > READ_LIMIT:
                self.loop.call_soon_threadsafe(self.lines.put_nowait, buf + b"\n")
                buf = b""
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            self.loop.call_soon_threadsafe(self.lines.put_nowait, b"")

    async def send(self, data: bytes) -> None:
        def _write() -> None:
            self.port.write(data)
            self.port.flush()

        try:
            await asyncio.to_thread(_write)
        except (serial.SerialException, OSError) as exc:
            raise DeviceUnreachable(f"agent on serial {self.name}: write failed: {exc}") from None

    async def readline(self) -> bytes:
        if self.closed.is_set() and self.lines.empty():
            return b""
        return await self.lines.get()

    async def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            await asyncio.to_thread(self.thread.join, 2.0)
            with contextlib.suppress(Exception):
                self.port.close()


async def open_transport(url: str, *, baud: int = DEFAULT_BAUD, timeout: float = 5.0) -> LineTransport:
    """A transport for `url`: `tcp://HOST:PORT`, or a pyserial URL or port path (rfc2217://, socket://, /dev/tty...)."""
    if url.startswith("tcp://"):
        host, sep, port = url[len("tcp://") :].rstrip("/").rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"agent url {url!r}: expected tcp://HOST:PORT")
        return await StreamTransport.connect(host.strip("[]"), int(port), timeout=timeout)
    return await SerialTransport.open(url, baud)

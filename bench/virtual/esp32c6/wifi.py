"""The counted core's Wi-Fi: the packet pipe the firmware's `socket` module sends UDP datagrams on (a virtio
console in QEMU, on a socket pair this side owns), and a NAT gateway behind it.

Frames, both ways: `u16 payload length | IPv4 address | u16 port | payload` (big-endian), the destination on the
way out and the source on the way in. A datagram to the gateway, GATEWAY:port, leaves from one host UDP socket
bound on the loopback to 127.0.0.1:port (where the bench's CoAP update server listens); what comes back to that
socket is handed in from GATEWAY:port. Nothing else is routed: the board reaches the bench host's loopback
through its gateway and nothing more, as a board on an isolated Wi-Fi would, and QEMU itself opens no socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
from collections.abc import Callable

GATEWAY = "10.0.2.2"  # the board's gateway: the bench host, as QEMU's user networking calls it
HOST = "127.0.0.1"  # where the gateway's datagrams go out, and the only host address the board reaches
MTU = 1500  # payload bytes a frame may carry; larger datagrams are dropped
QUEUE = 16  # datagrams waiting for the firmware to take them; more are dropped
HEADER = struct.Struct(">H4sH")


def frame(ip: str, port: int, payload: bytes) -> bytes:
    """One frame of the pipe."""
    return HEADER.pack(len(payload), socket.inet_aton(ip), port) + payload


class Wifi:
    """The gateway on one end of the pipe `pipe` (the other end is QEMU's); `log` gets a line per drop."""

    def __init__(self, pipe: socket.socket, log: Callable[[str], None] | None = None) -> None:
        self.pipe = pipe
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.counts = {"out": 0, "in": 0, "no_route": 0, "too_big": 0, "queue_full": 0, "send_failed": 0}
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE)
        self._uplink: socket.socket | None = None  # a plain socket: asyncio's datagram transport drops empty ones
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Open the host socket and start relaying."""
        uplink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        uplink.bind((HOST, 0))
        uplink.setblocking(False)
        asyncio.get_running_loop().add_reader(uplink.fileno(), self._inbound)
        self._uplink = uplink
        reader, writer = await asyncio.open_unix_connection(sock=self.pipe)
        self._tasks = [asyncio.ensure_future(self._outbound(reader)), asyncio.ensure_future(self._write(writer))]

    async def close(self) -> None:
        """Stop relaying and close the host socket (the core was reset or lost power)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task
        self._tasks = []
        if self._uplink is not None:
            asyncio.get_running_loop().remove_reader(self._uplink.fileno())
            self._uplink.close()
            self._uplink = None
        self.pipe.close()

    async def _outbound(self, reader: asyncio.StreamReader) -> None:
        """Frames from the firmware: to the host socket, or dropped."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                length, raw_ip, port = HEADER.unpack(await reader.readexactly(HEADER.size))
                payload = await reader.readexactly(length)
                ip = socket.inet_ntoa(raw_ip)
                if length > MTU:
                    self._drop("too_big", f"{length}-byte datagram to {ip}:{port}")
                elif ip != GATEWAY:
                    self._drop("no_route", f"datagram to {ip}:{port}")
                elif self._uplink is not None:
                    try:
                        self._uplink.sendto(payload, (HOST, port))
                        self.counts["out"] += 1
                    except OSError as exc:  # the host's buffer full, or nothing listening (ICMP): lost
                        self._drop("send_failed", f"datagram to {ip}:{port}: {exc.strerror}")

    def _inbound(self) -> None:
        """Datagrams to the host socket: queued for the firmware from GATEWAY:port."""
        while self._uplink is not None:
            try:
                data, (_, port) = self._uplink.recvfrom(65536)
            except BlockingIOError:
                return
            except OSError:  # an ICMP error from an earlier send: nothing to deliver
                continue
            if len(data) > MTU:
                self._drop("too_big", f"{len(data)}-byte datagram from {HOST}:{port}")
                continue
            try:
                self._queue.put_nowait(frame(GATEWAY, port, data))
            except asyncio.QueueFull:
                self._drop("queue_full", f"datagram from {HOST}:{port}: {QUEUE} already wait")

    async def _write(self, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                writer.write(await self._queue.get())
                await writer.drain()  # the firmware takes frames as it has buffers; the queue bounds the rest
                self.counts["in"] += 1
        finally:
            writer.close()

    def _drop(self, reason: str, what: str) -> None:
        self.counts[reason] += 1
        self.log(f"wifi: {reason.replace('_', ' ')}: dropped {what} ({self.counts[reason]} so far)")

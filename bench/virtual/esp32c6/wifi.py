"""The counted core's Wi-Fi: the packet pipe the firmware's `socket` module sends UDP datagrams on (a virtio
console in QEMU, on a socket pair this side owns), and a NAT gateway behind it.

Frames, both ways: `u16 payload length | IPv4 address | u16 port | payload` (big-endian), the destination on the
way out and the source on the way in. A datagram to the gateway, GATEWAY:port, leaves from one host UDP socket
bound on the loopback, to 127.0.0.1:port, only when `port` is one the bench granted this board (`Gateway.grant`:
the port of the update server, or impairment proxy, the bench started for it); a datagram that comes back to that
socket is handed in from GATEWAY:port only when it came from 127.0.0.1 and a granted port, so another local user
can neither inject into the board nor be reached by it, and the board reaches no other board's uplink and no
guest's forwarded port. Nothing else is routed, and QEMU itself opens no socket.

Every datagram refused is counted (`Gateway.counts`, in the board's `status` and one summary line in its log when
a boot ends), never logged one line each: board code or a neighbour sending a storm costs counters, not disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
from collections.abc import Callable, Iterable

GATEWAY = "10.0.2.2"  # the board's gateway: the bench host, as QEMU's user networking calls it
GATEWAY_RAW = socket.inet_aton(GATEWAY)
HOST = "127.0.0.1"  # where the gateway's datagrams go out, and the only host address the board reaches
MTU = 1500  # payload bytes a frame may carry; larger datagrams are dropped
QUEUE = 16  # datagrams waiting for the firmware to take them; more are dropped
MAX_GRANTS = 16  # ports one board may be granted at once
READS_PER_WAKE = 256  # datagrams taken from the host socket before the event loop runs the board's other work
HEADER = struct.Struct(">H4sH")
# why a datagram was dropped -> how the summary line says it
DROPS = {
    "no_route": "not to the gateway",
    "not_granted": "to a port the bench serves the board nothing on",
    "too_big": "over the MTU",
    "send_failed": "the host refused",
    "stranger": "from no server of the bench",
    "queue_full": "the firmware's queue full",
}


def frame(ip: str, port: int, payload: bytes) -> bytes:
    """One frame of the pipe."""
    return HEADER.pack(len(payload), socket.inet_aton(ip), port) + payload


class Gateway:
    """What the board's NAT keeps across boots: the host ports it may reach and the datagrams counted."""

    def __init__(self) -> None:
        self.ports: frozenset[int] = frozenset()
        self.counts = dict.fromkeys(("out", "in", *DROPS), 0)

    def grant(self, ports: Iterable[int]) -> None:
        """From now on the board reaches exactly `ports` on the host's loopback (those of the servers the bench
        started for it); ValueError naming a port that is not one."""
        wanted = list(ports)
        bad = [p for p in wanted if not isinstance(p, int) or isinstance(p, bool) or not 0 < p < 65536]
        if bad:
            raise ValueError(f"uplink port {bad[0]!r} is not a UDP port (1-65535)")
        if len(set(wanted)) > MAX_GRANTS:
            raise ValueError(f"{len(set(wanted))} uplink ports: a board may be granted at most {MAX_GRANTS}")
        self.ports = frozenset(wanted)

    def revoke(self, ports: Iterable[int]) -> None:
        """Those of `ports` the board may no longer reach (their servers stopped)."""
        self.ports = self.ports - set(ports)

    def dropped(self) -> int:
        """Datagrams dropped so far, for every reason."""
        return sum(self.counts[reason] for reason in DROPS)

    def summary(self, since: dict[str, int]) -> str:
        """One line: the datagrams dropped since the counts were `since`, by reason ('' when none)."""
        new = {r: self.counts[r] - since.get(r, 0) for r in DROPS}
        parts = [f"{n} {DROPS[r]}" for r, n in new.items() if n > 0]
        return f"wifi: dropped {'; '.join(parts)}" if parts else ""


class Wifi:
    """The gateway on one end of the pipe `pipe` (the other end is QEMU's) for one boot; `gateway` holds the granted
    ports and the counts, `log` gets the boot's one summary line of drops."""

    def __init__(
        self, pipe: socket.socket, gateway: Gateway | None = None, log: Callable[[str], None] | None = None
    ) -> None:
        self.pipe = pipe
        self.gateway = gateway or Gateway()
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._start_counts = dict(self.gateway.counts)
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE)
        self._uplink: socket.socket | None = None  # a plain socket: asyncio's datagram transport drops empty ones
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def counts(self) -> dict[str, int]:
        """Datagrams relayed and dropped, by reason (across the board's boots)."""
        return self.gateway.counts

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
        """Stop relaying and close the host socket (the core was reset or lost power); log the boot's drops."""
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
        if line := self.gateway.summary(self._start_counts):
            self.log(line)
        self._start_counts = dict(self.gateway.counts)

    async def _outbound(self, reader: asyncio.StreamReader) -> None:
        """Frames from the firmware: to a granted port of the host's loopback, or dropped."""
        counts = self.gateway.counts
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                length, raw_ip, port = HEADER.unpack(await reader.readexactly(HEADER.size))
                payload = await reader.readexactly(length)
                if length > MTU:
                    counts["too_big"] += 1
                elif raw_ip != GATEWAY_RAW:
                    counts["no_route"] += 1
                elif port not in self.gateway.ports:
                    counts["not_granted"] += 1
                elif self._uplink is not None:
                    try:
                        self._uplink.sendto(payload, (HOST, port))
                        counts["out"] += 1
                    except OSError:  # the host's buffer full, or nothing listening (ICMP): lost
                        counts["send_failed"] += 1

    def _inbound(self) -> None:
        """Datagrams to the host socket from a granted server: queued for the firmware from GATEWAY:port."""
        counts = self.gateway.counts
        for _ in range(READS_PER_WAKE):  # a flood yields the loop to the rest of the board between batches
            if self._uplink is None:
                return
            try:
                data, (ip, port) = self._uplink.recvfrom(65536)
            except BlockingIOError:
                return
            except OSError:  # an ICMP error from an earlier send: nothing to deliver
                continue
            if ip != HOST or port not in self.gateway.ports:
                counts["stranger"] += 1
            elif len(data) > MTU:
                counts["too_big"] += 1
            else:
                try:
                    self._queue.put_nowait(frame(GATEWAY, port, data))
                except asyncio.QueueFull:
                    counts["queue_full"] += 1

    async def _write(self, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                writer.write(await self._queue.get())
                await writer.drain()  # the firmware takes frames as it has buffers; the queue bounds the rest
                self.gateway.counts["in"] += 1
        finally:
            writer.close()

"""A UDP impairment proxy for CoAP: loss, delay/jitter, duplication, reordering, a cut at a chosen block,
a corrupted block. Seeded (the same seed drops the same datagrams), bounded, loopback only.

It sits between the update server and a device: the device is given the proxy's address instead of the
server's. Block numbers are read from the server's Block2 option, so cuts and corruption hit the block
named, whatever the block size."""

from __future__ import annotations

import asyncio
import ipaddress
import random
from dataclasses import dataclass
from typing import Any

import aiocoap

from bench.core.errors import ConfigError
from bench.core.lifecycle import StartStop

MAX_PENDING = 4096  # datagrams held for delay or reordering; beyond this they are dropped (and counted)
MAX_CLIENTS = 64
REORDER_HOLD_S = 0.02  # a held-back datagram goes out after the next one, or after this long


@dataclass(frozen=True)
class Impairment:
    """What the proxy does to datagrams, in both directions unless said otherwise."""

    loss: float = 0.0  # probability a datagram is dropped
    delay_ms: float = 0.0  # added one-way delay
    jitter_ms: float = 0.0  # delay varies uniformly by +- this
    duplicate: float = 0.0  # probability a datagram is sent twice
    reorder: float = 0.0  # probability a datagram is held back and sent after the next one
    cut_at_block: int | None = None  # from the server's response carrying this block on, nothing passes until restore()
    corrupt_block: int | None = None  # the first server response carrying this block has payload bytes flipped
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder"):
            if not 0.0 <= getattr(self, name) <= 0.5:
                raise ConfigError(f"impairment: {name} {getattr(self, name)} is outside 0..0.5")
        if not 0.0 <= self.delay_ms <= 5000 or not 0.0 <= self.jitter_ms <= 5000:
            raise ConfigError("impairment: delay_ms and jitter_ms must be within 0..5000")
        for name in ("cut_at_block", "corrupt_block"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ConfigError(f"impairment: {name} must be a block number >= 0")


@dataclass
class ProxyStats:
    """Datagrams seen and what happened to them."""

    forwarded: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    delayed: int = 0
    corrupted: int = 0
    cut_dropped: int = 0
    overflow: int = 0


def _require_loopback(host: str, what: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ConfigError(f"impairment proxy: {what} {host} is not a loopback address (the proxy is loopback only)")


def _block_number(datagram: bytes) -> int | None:
    try:
        block2 = aiocoap.Message.decode(datagram).opt.block2
    except Exception:  # not CoAP, or damaged: no block number
        return None
    return block2.block_number if block2 is not None else None


class _Side(asyncio.DatagramProtocol):
    def __init__(self, on_datagram: Any) -> None:
        self.on_datagram = on_datagram
        self.transport: asyncio.DatagramTransport | None = None
        self.waiting: list[bytes] | None = []  # client datagrams that came before the upstream socket was ready

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.on_datagram(data, addr)


class ImpairmentProxy(StartStop):
    """`async with ImpairmentProxy(("127.0.0.1", server_port), Impairment(loss=0.01)) as proxy: proxy.port`."""

    def __init__(self, upstream: tuple[str, int], impairment: Impairment, listen_host: str = "127.0.0.1") -> None:
        _require_loopback(upstream[0], "upstream")
        _require_loopback(listen_host, "listen address")
        self.upstream = upstream
        self.impairment = impairment
        self.listen_host = listen_host
        self.port = 0
        self.stats = ProxyStats()
        self._rng = random.Random(impairment.seed)
        self._cut = False
        self._cut_done = False
        self._corrupt_done = False
        self._pending = 0
        self._held: dict[str, tuple[Any, bytes, asyncio.TimerHandle]] = {}
        self._listen: _Side | None = None
        self._clients: dict[tuple[str, int], _Side] = {}

    async def start(self) -> int:
        """Listen; return the port devices should use."""
        loop = asyncio.get_running_loop()
        _, self._listen = await loop.create_datagram_endpoint(
            lambda: _Side(self._from_client), local_addr=(self.listen_host, 0)
        )
        self.port = self._listen.transport.get_extra_info("sockname")[1]
        return self.port

    async def stop(self) -> None:
        """Close every socket."""
        for side in [*self._clients.values(), self._listen]:
            if side is not None and side.transport is not None:
                side.transport.close()
        self._clients.clear()
        for _, _, timer in self._held.values():
            timer.cancel()
        self._held.clear()

    @property
    def base_url(self) -> str:
        """`coap://HOST:PORT` of the proxy."""
        return f"coap://{self.listen_host}:{self.port}"

    def restore(self) -> None:
        """End a cut: datagrams pass again (the cut does not happen a second time)."""
        self._cut = False

    def _from_client(self, data: bytes, addr: tuple[str, int]) -> None:
        side = self._clients.get(addr)
        if side is None:
            if len(self._clients) >= MAX_CLIENTS:
                self.stats.overflow += 1
                return
            side = _Side(lambda d, _a, client=addr: self._impair(d, "down", self._send_to_client(client)))
            self._clients[addr] = side
            loop = asyncio.get_running_loop()
            task = loop.create_task(
                loop.create_datagram_endpoint(lambda: side, local_addr=(self.listen_host, 0), remote_addr=self.upstream)
            )
            task.add_done_callback(lambda _t: self._upstream_ready(side))
        if side.waiting is not None:
            if len(side.waiting) >= MAX_PENDING:
                self.stats.overflow += 1
            else:
                side.waiting.append(data)
            return
        self._impair(data, "up", self._send_upstream(side))

    def _upstream_ready(self, side: _Side) -> None:
        waiting, side.waiting = side.waiting or [], None
        for data in waiting:
            self._impair(data, "up", self._send_upstream(side))

    def _send_upstream(self, side: _Side) -> Any:
        return lambda d: side.transport.sendto(d) if side.transport and not side.transport.is_closing() else None

    def _send_to_client(self, client: tuple[str, int]) -> Any:
        transport = self._listen.transport
        return lambda d: transport.sendto(d, client) if not transport.is_closing() else None

    def _impair(self, data: bytes, direction: str, send: Any) -> None:
        imp = self.impairment
        if self._cut:
            self.stats.cut_dropped += 1
            return
        if direction == "down" and (imp.cut_at_block is not None or imp.corrupt_block is not None):
            num = _block_number(data)
            if num is not None and imp.cut_at_block is not None and num >= imp.cut_at_block and not self._cut_done:
                self._cut = self._cut_done = True
                self.stats.cut_dropped += 1
                return
            if num is not None and num == imp.corrupt_block and not self._corrupt_done:
                self._corrupt_done = True
                self.stats.corrupted += 1
                data = data[:-8] + bytes(b ^ 0xFF for b in data[-8:])  # the payload ends the datagram
        if self._rng.random() < imp.loss:
            self.stats.dropped += 1
            return
        copies = 2 if self._rng.random() < imp.duplicate else 1
        self.stats.duplicated += copies - 1
        if direction not in self._held and self._rng.random() < imp.reorder:
            self.stats.reordered += 1
            timer = asyncio.get_running_loop().call_later(REORDER_HOLD_S, self._release, direction)
            self._held[direction] = (send, data, timer)
            return
        for _ in range(copies):
            self._emit(send, data)
        self._release(direction)

    def _release(self, direction: str) -> None:
        held = self._held.pop(direction, None)
        if held is not None:
            send, data, timer = held
            timer.cancel()
            self._emit(send, data)

    def _emit(self, send: Any, data: bytes) -> None:
        imp = self.impairment
        delay = max(0.0, imp.delay_ms + self._rng.uniform(-imp.jitter_ms, imp.jitter_ms)) / 1000
        if delay <= 0:
            self.stats.forwarded += 1
            send(data)
            return
        if self._pending >= MAX_PENDING:
            self.stats.overflow += 1
            return
        self._pending += 1
        self.stats.delayed += 1
        asyncio.get_running_loop().call_later(delay, self._delayed_send, send, data)

    def _delayed_send(self, send: Any, data: bytes) -> None:
        self._pending -= 1
        self.stats.forwarded += 1
        send(data)

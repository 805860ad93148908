"""The impairment proxy's own rules: loopback only, bounded settings, the same seed drops the same datagrams."""

from __future__ import annotations

import asyncio
import socket

import pytest

from bench.core.errors import ConfigError
from bench.ota.impair import Impairment, ImpairmentProxy


def test_refuses_non_loopback_addresses_and_unbounded_settings() -> None:
    with pytest.raises(ConfigError, match="loopback"):
        ImpairmentProxy(("192.0.2.10", 5683), Impairment())
    with pytest.raises(ConfigError, match="loopback"):
        ImpairmentProxy(("127.0.0.1", 5683), Impairment(), listen_host="0.0.0.0")
    for bad in ({"loss": 0.9}, {"duplicate": -0.1}, {"delay_ms": 10_000}, {"cut_at_block": -1}):
        with pytest.raises(ConfigError):
            Impairment(**bad)


def _drops(seed: int) -> list[int]:
    """Which of 200 datagrams sent through a 20%-loss proxy to a UDP sink arrive, by index."""

    async def run() -> list[int]:
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(("127.0.0.1", 0))
        sink.setblocking(False)
        async with ImpairmentProxy(sink.getsockname(), Impairment(loss=0.2, seed=seed)) as proxy:
            sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for i in range(200):
                sender.sendto(i.to_bytes(2, "big"), ("127.0.0.1", proxy.port))
                await asyncio.sleep(0.001)
            await asyncio.sleep(0.2)
            got = []
            while True:
                try:
                    got.append(int.from_bytes(sink.recv(16), "big"))
                except BlockingIOError:
                    break
            sender.close()
        sink.close()
        return sorted(set(range(200)) - set(got))

    return asyncio.run(run())


def test_same_seed_drops_the_same_datagrams() -> None:
    first, again, other = _drops(1), _drops(1), _drops(2)
    assert 10 < len(first) < 70  # about 20% of 200
    assert first == again and first != other

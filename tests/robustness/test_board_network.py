"""Board code and neighbours against the counted ESP32-C6's Wi-Fi gateway (bench.virtual.esp32c6.wifi): the
firmware's end of the packet pipe is driven frame by frame here (the pipe's protocol, as QEMU's virtio console
carries it), the host end is the real gateway with its real loopback UDP socket. A neighbour's datagrams, ports
the bench did not grant, storms: each is dropped and counted, never a line each in the log, and the bench's own
server still gets through. The same against the whole board process is tests/robustness/test_board_floods.py."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from bench.virtual import uplinks
from bench.virtual.esp32c6.wifi import GATEWAY, HEADER, MAX_GRANTS, MTU, QUEUE, Gateway, Wifi, frame


class Firmware:
    """The firmware's end of the pipe: frames out, frames in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, ip: str, port: int, payload: bytes) -> None:
        self.writer.write(frame(ip, port, payload))
        await self.writer.drain()

    async def recv(self, timeout: float = 1.0) -> tuple[str, int, bytes] | None:
        try:
            length, raw_ip, port = HEADER.unpack(await asyncio.wait_for(self.reader.readexactly(HEADER.size), timeout))
        except TimeoutError:
            return None
        return socket.inet_ntoa(raw_ip), port, await self.reader.readexactly(length)


@contextlib.asynccontextmanager
async def gateway(*grants: int) -> AsyncIterator[tuple[Wifi, Firmware, list[str]]]:
    ours, theirs = socket.socketpair()
    lines: list[str] = []
    gw = Gateway()
    gw.grant(grants)
    wifi = Wifi(ours, gw, log=lines.append)
    await wifi.start()
    reader, writer = await asyncio.open_unix_connection(sock=theirs)
    try:
        yield wifi, Firmware(reader, writer), lines
    finally:
        writer.close()
        await wifi.close()


def udp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def uplink_of(wifi: Wifi) -> tuple[str, int]:
    assert wifi._uplink is not None
    return wifi._uplink.getsockname()


async def settle() -> None:
    await asyncio.sleep(0.05)


def test_a_neighbours_datagram_from_another_port_is_dropped_and_counted() -> None:
    async def run() -> None:
        server, neighbour = udp(), udp()
        async with gateway(server.getsockname()[1]) as (wifi, fw, lines):
            neighbour.sendto(b"forged CoAP reply", uplink_of(wifi))
            await settle()
            assert await fw.recv(0.3) is None
            assert wifi.counts["stranger"] == 1 and not lines
            server.sendto(b"real reply", uplink_of(wifi))  # the bench's server, from the port it serves
            assert await fw.recv() == (GATEWAY, server.getsockname()[1], b"real reply")
        assert lines == ["wifi: dropped 1 from no server of the bench"]

    asyncio.run(run())


def test_a_neighbour_on_another_loopback_address_with_the_servers_port_is_dropped() -> None:
    """127.0.0.2:PORT can be bound by anyone while the bench's server holds 127.0.0.1:PORT."""

    async def run() -> None:
        server = udp()
        port = server.getsockname()[1]
        spoof = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        spoof.bind(("127.0.0.2", port))
        async with gateway(port) as (wifi, fw, _):
            spoof.sendto(b"forged from the server's port", uplink_of(wifi))
            await settle()
            assert await fw.recv(0.3) is None and wifi.counts["stranger"] == 1
        spoof.close()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("ip", "port", "why"),
    [
        ("127.0.0.1", None, "no_route"),  # the host's loopback by its own name: only the gateway is routed
        ("255.255.255.255", 9, "no_route"),
        ("0.0.0.0", 9, "no_route"),
        ("10.0.2.3", None, "no_route"),  # QEMU's DNS address: there is none
        (GATEWAY, 0, "not_granted"),
    ],
)
def test_odd_destinations_are_not_routed(ip: str, port: int | None, why: str) -> None:
    async def run() -> None:
        server = udp()
        async with gateway(server.getsockname()[1]) as (wifi, fw, _):
            await fw.send(ip, server.getsockname()[1] if port is None else port, b"x")
            await settle()
            with pytest.raises(BlockingIOError):
                server.recv(100)
            assert wifi.counts[why] == 1 and wifi.counts["out"] == 0

    asyncio.run(run())


def test_a_granted_port_nobody_listens_on_is_counted_as_refused_by_the_host() -> None:
    async def run() -> None:
        gone = udp()
        port = gone.getsockname()[1]
        gone.close()  # the server stopped but its port was not revoked yet: ICMP port unreachable
        async with gateway(port) as (wifi, fw, lines):
            for _ in range(50):
                await fw.send(GATEWAY, port, b"x")
            await settle()
            assert wifi.counts["out"] + wifi.counts["send_failed"] == 50 and not lines

    asyncio.run(run())


def test_the_board_reaches_no_port_the_bench_did_not_grant() -> None:
    async def run() -> None:
        server, other_board, users_socket = udp(), udp(), udp()
        async with gateway(server.getsockname()[1]) as (wifi, fw, _):
            for sock in (other_board, users_socket):
                await fw.send(GATEWAY, sock.getsockname()[1], b"path and token")
            await fw.send(GATEWAY, server.getsockname()[1], b"GET")
            await settle()
            for sock in (other_board, users_socket):
                with pytest.raises(BlockingIOError):
                    sock.recv(100)
            assert server.recv(100) == b"GET"
            assert wifi.counts["not_granted"] == 2 and wifi.counts["out"] == 1

    asyncio.run(run())


def test_a_revoked_port_is_no_longer_reached_and_its_replies_are_dropped() -> None:
    async def run() -> None:
        server = udp()
        port = server.getsockname()[1]
        async with gateway(port) as (wifi, fw, _):
            wifi.gateway.revoke([port])
            await fw.send(GATEWAY, port, b"after the server stopped")
            server.sendto(b"late", uplink_of(wifi))
            await settle()
            with pytest.raises(BlockingIOError):
                server.recv(100)
            assert await fw.recv(0.3) is None
            assert wifi.counts["not_granted"] == 1 and wifi.counts["stranger"] == 1

    asyncio.run(run())


def test_a_board_side_storm_costs_counters_not_log_lines() -> None:
    async def run() -> None:
        async with gateway() as (wifi, fw, lines):
            for n in range(20_000):
                await fw.send("192.0.2.1" if n % 2 else GATEWAY, 9 + n % 7, b"x" * 64)
            await fw.send(GATEWAY, 9, b"y" * (MTU + 1))
            await settle()
            assert not lines
            assert wifi.counts["no_route"] == 10_000 and wifi.counts["not_granted"] == 10_000
            assert wifi.counts["too_big"] == 1
        assert len(lines) == 1 and len(lines[0]) < 200

    asyncio.run(run())


def test_a_neighbours_flood_neither_fills_the_queue_nor_logs() -> None:
    async def run() -> None:
        server, neighbour = udp(), udp()
        async with gateway(server.getsockname()[1]) as (wifi, fw, lines):
            for _ in range(QUEUE * 50):
                neighbour.sendto(b"x" * 512, uplink_of(wifi))
            await settle()
            server.sendto(b"still heard", uplink_of(wifi))
            assert await fw.recv() == (GATEWAY, server.getsockname()[1], b"still heard")
            assert wifi.counts["stranger"] > 0 and wifi.counts["queue_full"] == 0 and not lines

    asyncio.run(run())


def test_the_bench_server_may_not_flood_the_firmware_past_its_queue() -> None:
    async def run() -> None:
        server = udp()
        async with gateway(server.getsockname()[1]) as (wifi, fw, _):
            for n in range(QUEUE * 4):
                server.sendto(struct.pack(">I", n), uplink_of(wifi))
            await settle()
            got = 0
            while await fw.recv(0.2) is not None:
                got += 1
            assert QUEUE <= got < QUEUE * 4 and wifi.counts["queue_full"] == QUEUE * 4 - got

    asyncio.run(run())


@pytest.mark.parametrize(
    ("ports", "why"),
    [([0], "0"), ([65536], "65536"), (["5683"], "'5683'"), ([True], "True"), ([-1], "-1"), ([1.5], "1.5")],
)
def test_a_grant_of_something_not_a_port_is_refused_by_name(ports: list, why: str) -> None:
    with pytest.raises(ValueError, match=f"uplink port {why} is not a UDP port"):
        Gateway().grant(ports)


def test_a_board_is_granted_at_most_its_share_of_ports() -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_GRANTS}"):
        Gateway().grant(range(1000, 1000 + MAX_GRANTS + 1))


def test_the_bench_grants_a_registered_board_only_and_revokes_from_all() -> None:
    class Board:
        def __init__(self) -> None:
            self.ports: list[int] = []

        def grant_uplinks(self, ports: list[int]) -> None:
            self.ports = list(ports)

        def revoke_uplinks(self, ports: list[int]) -> None:
            self.ports = [p for p in self.ports if p not in ports]

    class Gone(Board):
        def grant_uplinks(self, ports: list[int]) -> None:
            raise ConnectionRefusedError(111, "the board process is gone")

    a, b = Board(), Board()
    uplinks.register("gone", Gone())
    uplinks.register("a", a)
    uplinks.register("b", b)
    try:
        uplinks.grant("a", 5683)
        uplinks.grant("nobody", 5684)  # no board of that name: nothing to do
        uplinks.grant("gone", 5684)  # a board whose process is gone reaches nothing: no error either
        assert a.ports == [5683] and b.ports == []
        uplinks.grant("b", 5683)
        uplinks.revoke([5683])
        assert a.ports == b.ports == []
    finally:
        uplinks.unregister("a")
        uplinks.unregister("b")
        uplinks.unregister("gone")

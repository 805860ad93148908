"""Another user's connection flood at a virtual board's serial port is refused cheaply (bench.virtual.port_access):
the peer is found with one search of the socket table, root's connection is admitted there and then, a uid that
was refused is refused without a look at /proc for a while, at most MAX_SCANS looks run at once, and the log gets
one line per uid a minute, however many connections it refused."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time

import pytest

from bench.virtual import port_access

UID = 54321
# a loopback address of the tests' own: in a full test run, other tests' clients that check a port on 127.0.0.1 by
# connecting and hanging up at once would otherwise reach these servers once their port number is reused
HOST = "127.0.0.2"
FLOOD = """
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(n):
    try:
        with socket.create_connection((sys.argv[3], port), timeout=5) as sock:
            sock.recv(100)  # held until the board judged it and hung up
    except OSError:
        pass
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user"
)


def run_gate(connects: int) -> tuple[port_access.Gate, list[str], float, float]:
    """Serve a port through a Gate while another user connects `connects` times; then root connects. (gate, log
    lines, seconds the flood took, seconds root waited for its verdict)."""
    lines: list[str] = []

    async def run() -> tuple[port_access.Gate, float, float]:
        gate = port_access.Gate(False, lines.append)
        admitted: list[bool] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            verdict = await gate.admit(writer.get_extra_info("peername"), writer.get_extra_info("sockname"), "socket")
            admitted.append(verdict.admitted)
            writer.close()

        server = await asyncio.start_server(handle, HOST, 0, backlog=512)
        port = server.sockets[0].getsockname()[1]
        started = time.monotonic()
        flood = await asyncio.create_subprocess_exec(
            "setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", sys.executable, "-c", FLOOD,
            str(port), str(connects), HOST, cwd="/",
        )  # fmt: skip
        await flood.wait()
        flood_s = time.monotonic() - started
        started = time.monotonic()
        reader, writer = await asyncio.open_connection(HOST, port)
        await reader.read()  # closed once judged
        root_s = time.monotonic() - started
        writer.close()
        await asyncio.sleep(0.1)
        server.close()
        assert admitted[-1] is True and not any(admitted[:-1]), admitted[-5:]
        return gate, flood_s, root_s

    gate, flood_s, root_s = asyncio.run(run())
    return gate, lines, flood_s, root_s


def test_a_flood_of_another_user_is_refused_cheaply_and_root_gets_in_at_once() -> None:
    gate, lines, flood_s, root_s = run_gate(2000)
    assert gate.refused == 2000
    assert root_s < 0.5, root_s
    assert flood_s < 30, flood_s  # each refusal a search of the table, not a walk of /proc
    assert len(lines) == 1 and f"refused uid {UID}" in lines[0], lines


def test_connections_closed_at_once_are_nobodys_and_logged_once() -> None:
    """A socket no process holds any more (the client hung up first: TIME_WAIT, which the kernel shows as uid 0)
    is nobody's: refused, not taken for root's."""
    gate = port_access.Gate(False, lambda line: None)
    lines: list[str] = []
    gate.log = lines.append

    async def run() -> list[bool]:
        verdicts: list[bool] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(0.2)  # the client is gone by now
            peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
            verdicts.append((await gate.admit(peer, local, "socket")).admitted)
            writer.close()

        server = await asyncio.start_server(handle, HOST, 0)
        for _ in range(20):
            _, writer = await asyncio.open_connection(HOST, server.sockets[0].getsockname()[1])
            writer.close()
        await asyncio.sleep(0.5)
        server.close()
        return verdicts

    assert asyncio.run(run()) == [False] * 20
    assert len(lines) == 1 and "(unknown)" in lines[0]


def test_a_refusal_names_the_rule_and_repeats_say_how_many() -> None:
    gate = port_access.Gate(False, lambda line: None)
    lines: list[str] = []
    gate.log = lines.append
    for _ in range(3):
        gate._log_refusal("rfc2217", f"uid {UID}, pid 1")
    assert len(lines) == 1 and port_access.RULE in lines[0]
    gate._logged = {k: (v[0] - port_access.LOG_EVERY_S, v[1]) for k, v in gate._logged.items()}
    gate._log_refusal("rfc2217", f"uid {UID}, pid 2")
    assert lines[-1].endswith("(2 more refused since the last line)")

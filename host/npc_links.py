"""The host agent's links to the bench: TCP connections and stdin/stdout, each a line stream."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import wire
from npc_models import now_us

MAX_BUFFERED = 1 << 20  # a bench that stops reading loses frame records, never the agent's memory
READ_LIMIT = 1 << 16


class Link:
    """One bench connection: writes lines without blocking the frame loop."""

    def __init__(self, writer, name: str) -> None:
        self.writer = writer
        self.name = name
        self.dropped = 0

    def write(self, line: bytes) -> None:
        transport = self.writer.transport
        if transport.is_closing():
            return
        if transport.get_write_buffer_size() > MAX_BUFFERED:
            self.dropped += 1
            return
        self.writer.write(line)

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.drain()


class FileLink:
    """stdout when it is a regular file (not a pipe): plain blocking writes."""

    def __init__(self, fileobj, name: str) -> None:
        self.fileobj = fileobj
        self.name = name
        self.dropped = 0

    def write(self, line: bytes) -> None:
        self.fileobj.write(line)
        self.fileobj.flush()

    async def drain(self) -> None:
        return None


async def _serve_link(agent, reader, link: Link, boot) -> None:
    agent.links.add(link)
    try:
        for text in boot:
            link.write((f"{text}\n").encode())
        link.write(wire.encode_reply(agent.hello_msg()))
        for line in agent.undelivered:
            link.write(line)
        agent.undelivered.clear()
        while not agent.exit.is_set():
            try:
                line = await reader.readline()
            except ValueError as exc:  # over the buffer limit: the stream dropped it; answer as for any too-long line
                line = b"~" + b"x" * (wire.MAX_LINE + 1) + b"\n"
                if "not found" in str(exc):  # the rest of that line is still to come: read it away, one error
                    await _skip_rest_of_line(reader)
            except (ConnectionError, OSError):
                break
            rx_us = now_us()
            if not line:
                break
            await agent.handle_line(link, line, rx_us)
            await link.drain()
    finally:
        agent.links.discard(link)


async def _skip_rest_of_line(reader) -> None:
    """Read up to the end of an over-long line (StreamReader dropped its first part without the newline)."""
    while True:
        try:
            await reader.readline()
            return
        except ValueError as exc:
            if "not found" not in str(exc):
                return


async def serve_tcp(agent, listen: str, boot, port_file=None) -> None:
    """Accept bench connections on HOST:PORT until a `shutdown`."""
    host, _, port = listen.rpartition(":")

    async def on_connect(reader, writer):
        link = Link(writer, "tcp")
        try:
            await _serve_link(agent, reader, link, boot)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, host or "0.0.0.0", int(port), limit=READ_LIMIT)
    bound = server.sockets[0].getsockname()[1]
    sys.stderr.write(f"npc_agent: listening on {host}:{bound}\n")
    sys.stderr.flush()
    if port_file:
        with open(port_file, "w") as f:
            f.write(f"{bound}\n")
    async with server:
        await agent.exit.wait()
    server.close()


async def serve_stdio(agent, boot) -> None:
    """Speak on stdin/stdout until a `shutdown` or the end of stdin."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        w_transport, w_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
        link = Link(asyncio.StreamWriter(w_transport, w_protocol, reader, loop), "stdio")
    except ValueError:  # stdout is a regular file
        link = FileLink(sys.stdout.buffer, "stdio")
    await _serve_link(agent, reader, link, boot)
    if agent.loop_task is not None and not agent.loop_task.done():
        agent.stopping = True
        await agent.loop_task
    await link.drain()

"""A virtual device's control API: JSON lines over TCP on loopback, what a lab's relay and USB hub would do to
the real device. Every request is {"op": ...}; every reply {"ok": true, ...} or {"ok": false, "error": "..."}.
The stand-in `uhubctl` (host_tools/uhubctl) switches boards through it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def serve_control(handle: Handler, host: str = "127.0.0.1") -> asyncio.Server:
    """Serve `handle` on a free port of `host`."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = await handle(json.loads(line))
                except (ValueError, AttributeError) as exc:
                    reply = {"ok": False, "error": f"bad request: {exc}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, 0)


def control_url(server: asyncio.Server) -> str:
    """`tcp://host:port` of a control server."""
    host, port = server.sockets[0].getsockname()[:2]
    return f"tcp://{host}:{port}"

"""A virtual device's control API: JSON lines over TCP on loopback, what a lab's relay and USB hub would do to
the real device. Every request is {"op": ..., "token": ...}; every reply {"ok": true, ...} or {"ok": false,
"error": "..."}. The stand-in `uhubctl` (host_tools/uhubctl) switches boards through it.

Only the bench may power a board: the URL is `tcp://HOST:PORT/TOKEN`, with a secret token made when the
device starts, and a request without it (or with another) is refused and the connection closed."""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
REFUSED = "refused: this control port needs the token of its URL (tcp://HOST:PORT/TOKEN)"


def new_token() -> str:
    """A fresh control token (URL-safe)."""
    return secrets.token_urlsafe(24)


async def serve_control(handle: Handler, token: str, host: str = "127.0.0.1") -> asyncio.Server:
    """Serve `handle` on a free port of `host`, to requests that carry `token`."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    request = json.loads(line)
                    given = request.get("token")
                    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
                        writer.write(json.dumps({"ok": False, "error": REFUSED}).encode() + b"\n")
                        await writer.drain()
                        return
                    reply = await handle(request)
                except (ValueError, AttributeError) as exc:
                    reply = {"ok": False, "error": f"bad request: {exc}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, 0)


def control_url(server: asyncio.Server, token: str) -> str:
    """`tcp://host:port/token` of a control server."""
    host, port = server.sockets[0].getsockname()[:2]
    return f"tcp://{host}:{port}/{token}"


def parse_control_url(url: str) -> tuple[str, int, str]:
    """(host, port, token) of a control URL; ValueError when it is not `tcp://HOST:PORT/TOKEN`."""
    address, _, token = url.removeprefix("tcp://").partition("/")
    host, _, port = address.rpartition(":")
    if not url.startswith("tcp://") or not host or not port.isdigit():
        raise ValueError(f"control URL {url!r}: expected tcp://HOST:PORT/TOKEN")
    return host, int(port), token

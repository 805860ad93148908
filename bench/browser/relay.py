"""The bench-started browser's DevTools, for the bench's own code only: a WebSocket on loopback that relays
to the browser's pipe and takes one URL, `ws://127.0.0.1:PORT/devtools/browser/TOKEN`, with a secret token
made at start. Any other path (no token, a wrong one, Chromium's /json endpoints) is answered 403 before any
DevTools message passes. The URL goes to web devices' links and `hilbench virtual up`, never to a log.

Clients share the browser's one pipe: each command gets a pipe-wide id and its reply goes back under the
client's own id; events go to every client (pages pick theirs by session id, as on a browser's own port)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import websockets
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from bench.core.lifecycle import StartStop

if TYPE_CHECKING:
    from bench.browser.browser import Cdp

PATH_PREFIX = "/devtools/browser/"


class DevToolsRelay(StartStop):
    """A token-guarded WebSocket in front of a browser's DevTools pipe (`cdp`)."""

    def __init__(self, cdp: Cdp, host: str = "127.0.0.1") -> None:
        self.cdp = cdp
        self.host = host
        self.path = PATH_PREFIX + secrets.token_urlsafe(24)
        self.server: Server | None = None
        self.url = ""

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self.server = await serve(
            self._client, self.host, 0, process_request=self._check, max_size=None, compression=None
        )
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://{self.host}:{port}{self.path}"

    async def stop(self) -> None:
        """Close the port and every client."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        if hmac.compare_digest(request.path.encode(), self.path.encode()):
            return None
        return connection.respond(HTTPStatus.FORBIDDEN, "no DevTools here\n")

    async def _client(self, ws: ServerConnection) -> None:
        outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.cdp.listeners.append(outbox.put_nowait)
        sender = asyncio.create_task(_send_all(ws, outbox))
        replies: set[asyncio.Task[None]] = set()
        try:
            async for raw in ws:
                command = json.loads(raw)
                if not isinstance(command, dict) or not isinstance(command.get("id"), int):
                    continue
                reply = await self.cdp.forward({k: v for k, v in command.items() if k != "id"})
                task = asyncio.create_task(_answer(reply, command["id"], outbox))
                replies.add(task)
                task.add_done_callback(replies.discard)
        except (websockets.ConnectionClosed, ValueError):
            pass
        finally:
            with contextlib.suppress(ValueError):
                self.cdp.listeners.remove(outbox.put_nowait)
            for task in (*replies, sender):
                task.cancel()


async def _answer(reply: asyncio.Future[dict[str, Any]], client_id: int, outbox: asyncio.Queue) -> None:
    try:
        message = await reply
    except Exception as exc:  # the browser went away
        message = {"error": {"code": -32000, "message": str(exc)}}
    outbox.put_nowait({**message, "id": client_id})


async def _send_all(ws: ServerConnection, outbox: asyncio.Queue[dict[str, Any]]) -> None:
    with contextlib.suppress(websockets.ConnectionClosed):
        while True:
            await ws.send(json.dumps(await outbox.get()))

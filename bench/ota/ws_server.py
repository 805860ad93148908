"""The update server for web devices: the model store over WebSockets (one connection per resource).

The page connects to `ws://HOST:PORT/models/...`, sends `{"offset": N}`, and gets `{"size", "etag"}`, the
bytes from N in binary messages of CHUNK bytes, then `{"done": true}`; `{"error": ...}` when there is no
such resource. A transfer cut short resumes from the byte offset the page kept."""

from __future__ import annotations

import contextlib
import json

import websockets
from websockets.asyncio.server import ServerConnection

from bench.ota.resources import ChunkedServer, Served, lookup


class WsUpdateServer(ChunkedServer):
    """`async with WsUpdateServer(store) as srv: srv.port`."""

    async def start(self) -> WsUpdateServer:
        """Listen (on a free port when `port` is 0) and serve the store."""
        self._server = await websockets.serve(self._serve, self.host, self.port, compression=None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, conn: ServerConnection) -> None:
        path = conn.request.path.lstrip("/") if conn.request else ""
        with contextlib.suppress(websockets.ConnectionClosed):
            offset = _offset(await conn.recv())
            if offset is None:
                await conn.send(json.dumps({"error": 'bad request: send {"offset": N}, N a whole number >= 0'}))
                return
            res = lookup(self.store, path)
            if res is None:
                await conn.send(json.dumps({"error": f"no {path} in the model store"}))
                return
            counts = self.served.setdefault(path, Served())
            counts.transfers += 1
            counts.offsets.append(offset)
            await conn.send(json.dumps({"size": len(res.data), "etag": res.etag}))
            sent = 0
            for at in range(max(0, offset), len(res.data), self.chunk):
                if self.cut_after is not None and sent >= self.cut_after:
                    await conn.close()
                    return
                piece = res.data[at : at + self.chunk]
                await conn.send(piece)
                sent += len(piece)
                counts.bytes += len(piece)
            await conn.send(json.dumps({"done": True}))
            await conn.wait_closed()


def _offset(message: str | bytes) -> int | None:
    """The byte offset a `{"offset": N}` request asks for; None for anything else (not JSON, nested too deeply,
    not an object, N not a whole number >= 0 such as 1e400 or true)."""
    try:
        request = json.loads(message)
    except (ValueError, RecursionError):
        return None
    offset = request.get("offset") if isinstance(request, dict) else None
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return None
    return offset

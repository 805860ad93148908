"""Minimal clients of the bench's gRPC and WebSocket update servers, as an agent fetches a model: the hostile
tests ask them for paths a server must refuse."""

from __future__ import annotations

import json

import grpc
import websockets

from bench.ota.npcota_pb import METHOD, Chunk, FetchRequest


async def grpc_fetch(port: int, path: str) -> tuple[object, bytes]:
    """("OK", the bytes) of `path` from the gRPC server on `port`, or (the status code, b"") it refused with."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        fetch = channel.unary_stream(METHOD, FetchRequest.SerializeToString, Chunk.FromString)
        try:
            return "OK", b"".join([c.data async for c in fetch(FetchRequest(path=path, offset=0), timeout=10)])
        except grpc.aio.AioRpcError as exc:
            return exc.code(), b""


async def ws_fetch(port: int, path: str) -> tuple[str, bytes]:
    """How the WebSocket server on `port` ended serving `path` ("done", "error" or "closed") and what it sent."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/{path.lstrip('/')}", open_timeout=10) as ws:
        await ws.send(json.dumps({"offset": 0}))
        data = b""
        async for msg in ws:
            if isinstance(msg, bytes):
                data += msg
            elif "error" in json.loads(msg):
                return "error", data
            elif json.loads(msg).get("done"):
                return "done", data
        return "closed", data

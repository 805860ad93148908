"""The update server for Linux-class boards on the `grpc` channel: the model store as a server-streaming call.

`npcota.Updates/Fetch(FetchRequest{path, offset})` streams `Chunk{offset, data, size, etag}` messages of
CHUNK bytes from `offset` to the end of the resource at `path` (the CoAP server's paths, bench/ota/resources.py),
so a transfer cut in the middle resumes from the byte offset the device kept. NOT_FOUND for an unknown path."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from bench.core.errors import ConfigError
from bench.ota.npcota_pb import SERVICE, Chunk, FetchRequest
from bench.ota.resources import ChunkedServer, Served, lookup


class GrpcUpdateServer(ChunkedServer):
    """`async with GrpcUpdateServer(store) as srv: srv.port`."""

    _server: grpc.aio.Server | None

    async def start(self) -> GrpcUpdateServer:
        """Listen (on a free port when `port` is 0) and serve the store."""
        server = grpc.aio.server()
        handler = grpc.unary_stream_rpc_method_handler(
            self._fetch, request_deserializer=FetchRequest.FromString, response_serializer=Chunk.SerializeToString
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"Fetch": handler}),))
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.port = server.add_insecure_port(f"{host}:{self.port}")
        if not self.port:
            raise ConfigError(f"gRPC update server: cannot bind {self.host}")
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            await self._server.stop(grace=1)
            self._server = None

    async def _fetch(self, request: FetchRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[Chunk]:
        res = lookup(self.store, request.path)
        if res is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no {request.path} in the model store")
            return
        counts = self.served.setdefault(request.path, Served())
        counts.transfers += 1
        counts.offsets.append(request.offset)
        sent = 0
        for at in range(min(request.offset, len(res.data)), len(res.data), self.chunk):
            if self.cut_after is not None and sent >= self.cut_after:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "cut by the test")
                return
            piece = res.data[at : at + self.chunk]
            sent += len(piece)
            counts.bytes += len(piece)
            yield Chunk(offset=at, data=piece, size=len(res.data), etag=res.etag)

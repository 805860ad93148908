"""Fetch over the `grpc` update channel for the host agent: `npcota.Updates/Fetch`, a server-streaming call
(bench/ota/grpc_server.py), written to the same `.part` file as a CoAP transfer, so a call cut in the middle
resumes from the byte offset already written (when the server's ETag still matches)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
from npc_update import FetchStats, UpdateFailed
from npcota_pb import METHOD, Chunk, FetchRequest


class OverLimit(Exception):
    """The server broke a transfer bound (npc_update's): the caller deletes the part file and refuses."""


async def fetch(url: str, part: Path, stats: FetchStats, limit: int, timeout_s: float = 30.0) -> Path:
    """Fetch `grpc://HOST:PORT/models/...` (at most `limit` bytes, in order) into `part`, resuming from what it
    holds; return `part`."""
    target, _, path = url[len("grpc://") :].partition("/")
    meta_path = part.with_name(part.name + ".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() and part.is_file() else {}
    offset = part.stat().st_size if meta.get("etag") else 0
    stats.resumed_from = offset
    started = time.monotonic()
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_stream(
            METHOD, request_serializer=FetchRequest.SerializeToString, response_deserializer=Chunk.FromString
        )
        with part.open("r+b" if offset else "wb") as f:
            f.truncate(offset)
            f.seek(offset)
            try:
                async for chunk in call(FetchRequest(path=path, offset=offset), timeout=timeout_s):
                    if meta.get("etag") not in (None, chunk.etag):  # changed since the part was written
                        stats.restarts += 1
                        meta_path.unlink(missing_ok=True)
                        raise UpdateFailed("transfer", f"{url}: the resource changed; the next update restarts")
                    end = chunk.offset + len(chunk.data)
                    if chunk.offset != f.tell() or end > limit or chunk.size > limit or len(chunk.etag) > 64:
                        raise OverLimit(
                            f"a chunk at {chunk.offset} (expected {f.tell()}) to {end} of {chunk.size} B, "
                            f"the manifest says {limit}"
                        )
                    if not meta:
                        meta = {"etag": chunk.etag}
                        meta_path.write_text(json.dumps(meta))
                    f.seek(chunk.offset)
                    f.write(chunk.data)
                    f.flush()  # what arrived survives a crash of the agent
                    stats.blocks += 1
                    stats.bytes += len(chunk.data)
                    stats.size = chunk.size
            except grpc.aio.AioRpcError as exc:
                stats.transfer_s += time.monotonic() - started
                kept = f.tell()
                raise UpdateFailed(
                    "transfer", f"{url}: {exc.code().name}: {exc.details()}; {kept} B kept for resume", stats
                ) from None
    stats.transfer_s += time.monotonic() - started
    if part.stat().st_size != stats.size:
        raise UpdateFailed("transfer", f"{url}: got {part.stat().st_size} B of {stats.size}", stats)
    meta_path.unlink(missing_ok=True)
    return part

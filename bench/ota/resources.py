"""What an update server serves, looked up in the model store: the model files, their signed manifests, the
deltas and their manifests, by the paths of docs/protocol.md (`models/NAME/FORMAT/VERSION[/...]`). The
WebSocket and gRPC channels read the store through this; all three channels check a path with `segments`
(the store's name rule on every segment, nothing decoded), so `..`, `%2e%2e`, `a\\b` or `/abs` never name a
file (issue 31)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.core.errors import ConfigError
from bench.core.lifecycle import StartStop
from bench.ota.store import NAME_RE, ModelStore, version_of

CHUNK = 16 * 1024  # bytes per message of a streamed resource (a gRPC Chunk, a WebSocket binary frame)
DELTA_PATHS = {"delta": "bsdiff4", "delta-zlib": "bsdiff4-zlib"}


@dataclass(frozen=True)
class Resource:
    """One served resource: its bytes and its ETag (the first 8 bytes of its sha256, hex)."""

    data: bytes
    sha256: str

    @property
    def etag(self) -> str:
        return self.sha256[:16]


def _json(doc: dict) -> Resource:
    data = json.dumps(doc, sort_keys=True).encode()
    return Resource(data, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class Segments:
    """A served path taken apart: `NAME/FORMAT/VERSION`, then nothing (the model), `manifest`, or a delta
    (`algo` from its segment, `base` version) with or without `manifest`."""

    name: str
    fmt: str
    version: int
    manifest: bool = False
    algo: str | None = None
    base: int | None = None


def segments(parts: Sequence[str]) -> Segments | None:
    """The resource that path segments `parts` (after `models/`) name, when every segment follows the store's
    rules (names and formats `NAME_RE`, versions plain digits, the known keywords); None otherwise."""
    if len(parts) < 3 or not all(isinstance(p, str) for p in parts):
        return None
    name, fmt, version, *rest = parts
    v = version_of(version)
    if not NAME_RE.match(name) or not NAME_RE.match(fmt) or v is None:
        return None
    if not rest or rest == ["manifest"]:
        return Segments(name, fmt, v, manifest=bool(rest))
    base = version_of(rest[1]) if len(rest) in (2, 3) else None
    if rest[0] in DELTA_PATHS and base is not None and rest[2:] in ([], ["manifest"]):
        return Segments(name, fmt, v, manifest=len(rest) == 3, algo=DELTA_PATHS[rest[0]], base=base)
    return None


def lookup(store: ModelStore, path: str) -> Resource | None:
    """The resource at `path` (`models/...`, one optional leading slash), or None."""
    parts = path.removeprefix("/").split("/")
    seg = segments(parts[1:]) if parts[:1] == ["models"] else None
    if seg is None:
        return None
    try:
        if seg.algo is None and not seg.manifest:
            data = store.read_file(store.blob_path(seg.name, seg.version, seg.fmt))
            return Resource(data, store.manifest(seg.name, seg.version, seg.fmt)["sha256"])
        if seg.algo is None:
            return _json(store.manifest(seg.name, seg.version, seg.fmt))
        assert seg.base is not None
        dm = store.delta_manifest(seg.name, seg.version, seg.base, seg.fmt, seg.algo)
        if dm is None:
            return None
        if seg.manifest:
            return _json(dm)
        return Resource(
            store.read_file(store.delta_path(seg.name, seg.version, seg.base, seg.fmt, seg.algo)), dm["patch_sha256"]
        )
    except (ValueError, KeyError, TypeError, OSError, ConfigError):
        return None


@dataclass
class Served:
    """What an update server served at one path: transfers started (a gRPC call, a WebSocket request), bytes sent,
    offsets resumed from."""

    transfers: int = 0
    bytes: int = 0
    offsets: list[int] = field(default_factory=list)


class ChunkedServer(StartStop):
    """What the WebSocket and gRPC update servers share: the store they serve, where they listen (a free port when
    `port` is 0), the chunk size, what was served per path, and the tests' `cut_after` (end each transfer after
    this many bytes)."""

    def __init__(self, store: ModelStore, host: str = "127.0.0.1", port: int = 0, chunk: int = CHUNK) -> None:
        self.store = store
        self.host = host
        self.port = port
        self.chunk = chunk
        self.served: dict[str, Served] = {}
        self.cut_after: int | None = None
        self._server: Any = None

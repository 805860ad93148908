"""What an update server serves, looked up in the model store: the model files, their signed manifests, the
deltas and their manifests, by the paths of docs/protocol.md (`models/NAME/FORMAT/VERSION[/...]`). The
WebSocket and gRPC channels read the store through this."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from bench.errors import ConfigError
from bench.ota.store import ModelStore

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


def lookup(store: ModelStore, path: str) -> Resource | None:
    """The resource at `path` (`models/...`, no leading slash), or None."""
    parts = path.strip("/").split("/")
    if parts[:1] != ["models"]:
        return None
    try:
        name, fmt, version, *rest = parts[1:]
        v = int(version)
        if rest == []:
            return Resource(store.blob_path(name, v, fmt).read_bytes(), store.manifest(name, v, fmt)["sha256"])
        if rest == ["manifest"]:
            return _json(store.manifest(name, v, fmt))
        if len(rest) in (2, 3) and rest[0] in DELTA_PATHS:
            algo = DELTA_PATHS[rest[0]]
            dm = store.delta_manifest(name, v, int(rest[1]), fmt, algo)
            if dm is not None and rest[2:] == ["manifest"]:
                return _json(dm)
            if dm is not None and len(rest) == 2:
                return Resource(store.delta_path(name, v, int(rest[1]), fmt, algo).read_bytes(), dm["patch_sha256"])
    except (ValueError, OSError, ConfigError):
        return None
    return None

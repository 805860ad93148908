"""The bench services a pytest session shares between devices: the update servers of the devices' update
channels (CoAP, WebSocket, gRPC: bench/ota/channels.py) with their model store (the nightly's store: v1, v2,
forged signatures; and the nightly's fault models, named `npc-fault-<case>`) and a results store for replays."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.config.fleet import Device
from bench.core.errors import ConfigError
from bench.models import guess_name_and_format
from bench.models.signing import load_private_key
from bench.nightly.ota_stage import FAMILY, build_store, publish_faults
from bench.ota import channels
from bench.ota.rollout import bind_address
from bench.ota.store import ModelStore
from bench.store.results import ResultStore


class TestOta:
    """Started on first use, stopped with the pytest session."""

    __test__ = False  # not a test class, whatever pytest's name patterns say

    def __init__(self, root: Path, hosts: list[str], signing_key: Path) -> None:
        self.root = root
        self.signing_key = signing_key  # the fleet's signing key (bench.bundles.trust), as the nightly signs with
        self.hosts = hosts  # where the session's devices reach the bench (their ota_server_host)
        self._servers = contextlib.AsyncExitStack()
        self._ports: dict[str, int] = {}  # served update channel -> its port
        self._results: ResultStore | None = None
        self._built: tuple[ModelStore, dict] | None = None
        self._store_dir: Path | None = None  # the session's model store, removed when it ends

    @property
    def store(self) -> ModelStore:
        """The session's model store."""
        return self._store()[0]

    def manifest(self, case: str, device: Device) -> dict[str, Any]:
        """The manifest of `case` ("v1", "v2", "forged-v1", "forged-v2", "crash", "out-of-memory",
        "broken-weights") in the format `device` runs; ConfigError when there is none."""
        fmt = device.settings.model_format
        manifests = self._store()[1]
        if (fmt, case) not in manifests:
            known = sorted({c for f, c in manifests if f == fmt})
            raise ConfigError(f"device {device.name}: no {case!r} model in {fmt}", hint=f"known: {', '.join(known)}")
        return manifests[fmt, case]

    def resolve(self, model: str | Path | dict[str, Any], device: Device) -> dict[str, Any]:
        """A manifest for `model`: a manifest as is, a file path (published, signed with the fleet's signing
        key), a case name of `manifest()`, or NAME@VERSION from the store."""
        if isinstance(model, dict):
            return model
        if isinstance(model, Path):
            return self._published(model)
        if "@" in model:
            return self.store.resolve(model, device.settings.model_format)
        return self.manifest(model, device)

    def _published(self, model: Path) -> dict[str, Any]:
        """The store's manifest of the file `model` (published as the next version, signed with the fleet's
        signing key, unless a version with the same bytes is there already)."""
        _name, fmt = guess_name_and_format(model)
        try:
            sha = hashlib.sha256(model.read_bytes()).hexdigest()
        except OSError as exc:
            raise ConfigError(f"model {model}: cannot read: {exc.strerror}") from None
        store = self.store
        for version in store.versions(FAMILY, fmt) if fmt in store.formats(FAMILY) else []:
            if (manifest := store.manifest(FAMILY, version, fmt))["sha256"] == sha:
                return manifest
        return store.publish(model, load_private_key(self.signing_key), name=FAMILY, fmt=fmt).manifest

    async def ports(self, device: Device) -> dict[str, int]:
        """The served update channels and their ports, `device`'s own channel (its `update_channel`) started
        on first use."""
        channel = channels.channel_of(device)
        if channel not in self._ports:
            served = channels.serve(self.store, {channel}, bind_address(self.hosts))
            self._ports.update(await self._servers.enter_async_context(served))
        return self._ports

    def results(self) -> ResultStore:
        """The session's results store (SQLite, beside the logs)."""
        if self._results is None:
            self.root.mkdir(parents=True, exist_ok=True)
            self._results = ResultStore(self.root / "results.sqlite")
        return self._results

    async def close(self) -> None:
        """Stop the servers and close the results store."""
        self._ports = {}
        await self._servers.aclose()
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir, self._built = None, None
        if self._results is not None:
            self._results.close()
            self._results = None

    def _store(self) -> tuple[ModelStore, dict]:
        if self._built is None:  # a store of this session's own: the last session's left its fault models published
            self.root.mkdir(parents=True, exist_ok=True)
            self._store_dir = Path(tempfile.mkdtemp(prefix="ota-store-", dir=self.root))
            store, manifests = build_store(self._store_dir, self.signing_key)
            self._built = store, {**manifests, **publish_faults(store, self.signing_key)}
        return self._built

"""Every artefact the bench deployed, content-addressed by sha256 in the results store's folder
(`artefacts/<sha[:2]>/<sha><suffix>`), so a device can be put back to any earlier fingerprint.

Kept per device and run: the model file the device ran (the converted .npcm on MicroPython boards, with the
.tflite it was converted from), the firmware image (kinds that flash one), the agent bundle's files (a tar named by
the bundle hash the fingerprint carries) and the OS image id (Linux boards: the id is all the fingerprint has).
`index.json` maps each sha256 to its kind, its name and the source it was made from."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

from bench.bundles.c6_firmware import device_firmware
from bench.bundles.fingerprint import agent_bundle_files, firmware_sha256
from bench.config.fleet import Device
from bench.core.errors import BenchError
from bench.core.folders import write_file
from bench.core.paths import MODELS_DIR
from bench.models import is_model_path, kind_model, model_file
from bench.store.results import ResultStore


class ArtefactStore:
    """Content-addressed artefacts under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._index_path = root / "index.json"

    @classmethod
    def of(cls, store: ResultStore) -> ArtefactStore:
        """The artefacts of results store `store` (next to its file; under reports/ for a server store)."""
        return cls((store.local_dir or Path("reports")) / "artefacts")

    def index(self) -> dict[str, dict[str, Any]]:
        """sha256 -> {kind, name, suffix, source}."""
        try:
            return json.loads(self._index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def path(self, sha: str) -> Path | None:
        """The kept file of `sha` (None when it was never kept)."""
        entry = self.index().get(sha)
        if entry is None:
            return None
        found = self.root / sha[:2] / f"{sha}{entry.get('suffix', '')}"
        return found if found.is_file() else None

    def source(self, sha: str) -> Path | None:
        """The file `sha` was made from (a .npcm's .tflite), else the file itself."""
        entry = self.index().get(sha) or {}
        return self.path(entry["source"]) if entry.get("source") else self.path(sha)

    def keep_bytes(self, data: bytes, kind: str, name: str, suffix: str, source: str | None = None, *,
                   sha: str | None = None) -> str:  # fmt: skip
        """Keep `data` (once); its sha256 (or the given id `sha`, e.g. an agent bundle's hash)."""
        sha = sha or hashlib.sha256(data).hexdigest()
        target = self.root / sha[:2] / f"{sha}{suffix}"
        if not target.is_file():
            write_file(target, data, what="artefact store")
        index = self.index()
        if sha not in index:
            index[sha] = {"kind": kind, "name": name, "suffix": suffix, "source": source}
            write_file(self._index_path, json.dumps(index, indent=1, sort_keys=True), what="artefact store")
        return sha

    def keep_file(self, path: Path, kind: str, source: str | None = None) -> str:
        """Keep the file at `path`; its sha256."""
        return self.keep_bytes(path.read_bytes(), kind, path.name, path.suffix, source)


def keep_deployed(artefacts: ArtefactStore, device: Device) -> dict[str, str]:
    """Keep what `device` runs (its model, the model's source, its firmware, its agent bundle); component ->
    sha256 of what was kept. A part that cannot be read is left out (the fingerprint still names it)."""
    kept: dict[str, str] = {}
    try:
        deployed, _ = kind_model(device.kind, device.settings, MODELS_DIR)
        name = device.settings.model
        tflite = Path(name) if is_model_path(name) else model_file(name, "tflite")
        source = artefacts.keep_file(tflite, "model source") if tflite.is_file() and tflite != deployed else None
        kept["model"] = artefacts.keep_file(deployed, "model", source)
    except (BenchError, OSError):
        pass
    if firmware_sha256(device) is not None:  # the image is there and readable
        kept["firmware"] = artefacts.keep_file(device_firmware(device), "firmware")
    bundle, files = agent_bundle_files(device)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in files:
            info = tar.gettarinfo(str(path), arcname=path.name)
            info.mtime = 0  # the same files make the same tar
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    kept["agent"] = artefacts.keep_bytes(buffer.getvalue(), "agent bundle", f"{device.kind} agent", ".tar", sha=bundle)
    return kept

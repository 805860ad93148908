"""The bench's own files an image carries: the host agent bundle, the factory model with its signed
manifest, and the trusted public key. Everything here is byte-stable, so the image stays reproducible."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from bench.config.fleet import Device
from bench.config.kinds import get_kind, load
from bench.core.cachefiles import write_if_changed
from bench.core.errors import ConfigError
from bench.core.paths import MODELS_DIR as FIXTURE_MODELS
from bench.core.paths import cache_root
from bench.models import guess_name_and_format
from bench.models.signing import DEV_PRIVATE_KEY, DEV_PUBLIC_KEY, canonical_bytes, load_private_key, model_manifest

AGENT_DIR = "opt/npc/agent"
MODELS_DIR = "opt/npc/models"
KEY_PATH = f"{AGENT_DIR}/trusted.pub.pem"


def factory_model(kind: str) -> Path:
    """The model the image boots with: the kind's default `model`, int8 TFLite."""
    path = FIXTURE_MODELS / f"{get_kind(kind).defaults().model}.tflite"
    if not path.is_file():
        raise ConfigError(f"factory model {path} does not exist", hint="run fixtures/models/generate.py")
    return path


def signed_manifest(model: Path, key_path: Path = DEV_PRIVATE_KEY) -> bytes:
    """The model's manifest signed with the dev key. RFC 6979 deterministic ECDSA: same bytes every build."""
    name, fmt = guess_name_and_format(model)  # e.g. npc-policy-int8 -> name npc-policy, format tflite-int8
    manifest = model_manifest(model, name, 1, fmt)
    sig = load_private_key(key_path).sign(
        canonical_bytes(manifest), ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
    )
    manifest["sig"] = base64.b64encode(sig).decode("ascii")
    return json.dumps(manifest, sort_keys=True, indent=1).encode() + b"\n"


def agent_files(kind: str, scratch: Path) -> dict[str, Path]:
    """The host agent's flat folder from `bench.bundles.host_bundle`: code and trusted key only (its model
    manifest is signed with a random nonce; `guest_files` adds the model with a deterministic one)."""
    from bench.bundles import host_bundle

    # A guest image only ever boots under QEMU: a virtual device, which may trust the development key.
    device = Device(name=f"{kind}-image", kind=kind, link=None, virtual=True)
    return {f"{AGENT_DIR}/{dest}": Path(src) for src, dest in host_bundle(device, scratch) if "/" not in dest}


def guest_files(kind: str) -> dict[str, Path]:
    """Image path -> host file for everything of the bench's own that goes into the `kind` image."""
    model = factory_model(kind)
    manifest = cache_root() / "guest-files" / f"{model.stem}.json"
    data = signed_manifest(model)
    write_if_changed(manifest, data)  # whole or not at all: a parallel reader hashes it into the recipe digest
    return {
        KEY_PATH: DEV_PUBLIC_KEY,
        f"{MODELS_DIR}/{model.name}": model,
        f"{MODELS_DIR}/{manifest.name}": manifest,
        **agent_files(kind, manifest.parent / "bundle"),
    }


def board_files(profile: str | None) -> dict[str, Path]:
    """What a Linux-board disk image carries of the bench's own: the board profile ("module:NAME", e.g.
    bench.virtual.linux:PI5, the one home of those figures) its stand-in telemetry tools read."""
    if profile is None:
        return {}
    data = json.dumps(asdict(load(profile)), sort_keys=True, indent=1).encode() + b"\n"
    path = cache_root() / "guest-files" / f"{profile.rpartition(':')[2].lower()}-profile.json"
    write_if_changed(path, data)
    return {"usr/lib/npc-board/profile.json": path}

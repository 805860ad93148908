"""What a web device's storage holds (the folder its page reads at `/dev/NAME/`): the agent's settings, the
trusted key, and the signed model it starts with. The page itself and LiteRT.js come from the page server."""

from __future__ import annotations

import json
from pathlib import Path

from bench.browser.assets import litert_version, wasm_dir_url
from bench.core.folders import copy_file, write_file
from bench.models import signing

CURRENT = "current.json"


def deploy_storage(
    folder: Path,
    model: Path,
    *,
    version: int = 1,
    mem_limit_mb: int = 0,
    key_path: Path = signing.DEV_PRIVATE_KEY,
    pubkey_path: Path = signing.DEV_PUBLIC_KEY,
) -> dict:
    """Write the storage of a web device into `folder` (models/ kept, except the record of the current model,
    which is reset to the deployed one as a flash resets the other agents); returns the signed manifest."""
    fmt = "tflite-int8" if "int8" in model.stem else "tflite-f32"
    manifest = signing.sign_manifest(
        signing.model_manifest(model, "npc-policy", version, fmt), signing.load_private_key(key_path)
    )
    models = folder / "models"
    copy_file(model, models / model.name, what="web storage folder")
    copy_file(pubkey_path, folder / "trusted.pub.pem", what="web storage folder")
    config = {
        "model": model.name,
        "manifest": manifest,
        "mem_limit_mb": mem_limit_mb,
        "wasm_dir": wasm_dir_url(),
        "litert_version": litert_version(),
    }
    write_file(folder / "agent.json", json.dumps(config, indent=1) + "\n", what="web storage folder")
    current = json.dumps({"path": model.name, "manifest": manifest}) + "\n"
    write_file(models / CURRENT, current, what="web storage folder")
    return manifest

"""What a web device's storage holds (the folder its page reads at `/dev/NAME/`): the agent's settings, the
trusted key, and the signed model it starts with. The page itself and LiteRT.js come from the page server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench.browser.assets import litert_version, wasm_dir_url
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
    models.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, models / model.name)
    shutil.copyfile(pubkey_path, folder / "trusted.pub.pem")
    config = {
        "model": model.name,
        "manifest": manifest,
        "mem_limit_mb": mem_limit_mb,
        "wasm_dir": wasm_dir_url(),
        "litert_version": litert_version(),
    }
    (folder / "agent.json").write_text(json.dumps(config, indent=1) + "\n")
    (models / CURRENT).write_text(json.dumps({"path": model.name, "manifest": manifest}) + "\n")
    return manifest

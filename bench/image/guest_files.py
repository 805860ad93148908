"""The bench's own files an image carries: the host agent bundle, the factory model and the trusted key."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
AGENT_DIR = "opt/npc/agent"
MODEL_DIR = "opt/npc/models"
KEY_PATH = "opt/npc/keys/model-signing.pub.pem"
FACTORY_MODEL = REPO / "fixtures" / "models" / "npc-policy-int8.tflite"
TRUSTED_KEY = REPO / "fixtures" / "keys" / "dev-model-signing.pub.pem"


def guest_files(kind: str) -> dict[str, Path]:
    """Image path -> host file for everything of the bench's own that goes into the `kind` image."""
    files: dict[str, Path] = {KEY_PATH: TRUSTED_KEY}
    if FACTORY_MODEL.is_file():
        files[f"{MODEL_DIR}/{FACTORY_MODEL.name}"] = FACTORY_MODEL
    return files

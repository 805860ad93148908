"""Fixture NPC policy models: the catalogue of model files, and where they live."""

from __future__ import annotations

from pathlib import Path

from bench.errors import ConfigError

MODELS_DIR = Path(__file__).resolve().parent.parent.parent / "fixtures" / "models"

FEATURES = 48
ACTIONS = 8

# name -> layer widths (input, hidden..., logits). The `-int8` names are the kinds table's `model` defaults.
POLICY_LAYERS: dict[str, tuple[int, ...]] = {
    "npc-policy": (FEATURES, 64, 32, ACTIONS),
    "npc-policy-large": (FEATURES, 256, 256, 128, ACTIONS),
}


def model_file(name: str, ext: str = "tflite", models_dir: Path = MODELS_DIR) -> Path:
    """The fixture file for model `name` (e.g. `npc-policy-int8`) with extension `ext` (`tflite` or `npcm`)."""
    path = Path(models_dir) / f"{name}.{ext}"
    if not path.is_file():
        known = sorted(p.name for p in Path(models_dir).glob(f"*.{ext}"))
        raise ConfigError(
            f"model {name!r}: no file {path}",
            hint=f"known .{ext} models: {', '.join(known) or 'none'}; run `python fixtures/models/generate.py`",
        )
    return path

"""Fixture NPC policy models: the catalogue of model files, and where they live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from bench.kinds import Settings, get_kind

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


FORMAT_EXT = {"tflite-int8": "tflite", "tflite-f32": "tflite", "npcm-int8": "npcm"}


def kind_model(kind: str, settings: Settings | None = None, models_dir: Path = MODELS_DIR) -> tuple[Path, str]:
    """(model file, manifest format) a device of `kind` runs: its settings' `model`/`model_format` or the kind's."""
    settings = settings or get_kind(kind).defaults()
    fmt = settings.model_format
    if fmt not in FORMAT_EXT:
        raise ConfigError(f"model_format {fmt!r} of kind {kind}", hint=f"use one of {', '.join(FORMAT_EXT)}")
    return model_file(settings.model, FORMAT_EXT[fmt], models_dir), fmt


def fixture_manifest(path: Path, fmt: str) -> dict[str, Any]:
    """The unsigned manifest of a fixture model: name `npc-policy`, version 2 for the `-v2` files, else 1."""
    from bench.signing import model_manifest

    return model_manifest(Path(path), "npc-policy", 2 if Path(path).stem.endswith("-v2") else 1, fmt)

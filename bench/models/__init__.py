"""Fixture NPC policy models: the catalogue of model files, and where they live."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

from bench.config.kinds import KINDS, Settings, get_kind
from bench.core.errors import ConfigError
from bench.core.folders import own_folder, write_file
from bench.core.inputs import read_input
from bench.core.paths import MODELS_DIR

FEATURES = 48
ACTIONS = 8

# name -> layer widths (input, hidden..., logits). The `-int8` names are the kinds table's `model` defaults.
POLICY_LAYERS: dict[str, tuple[int, ...]] = {
    "npc-policy": (FEATURES, 64, 32, ACTIONS),
    "npc-policy-large": (FEATURES, 256, 256, 128, ACTIONS),
    # the size of the seed's smallest ESP32-C6 model (63 KB of int8, docs/esp32c6.md): 64,416 bytes as .tflite
    "npc-policy-63k": (FEATURES, 208, 192, ACTIONS),
}
# the policies built in int8 only: a float form of the seed-sized model would say nothing the large one does not
INT8_ONLY = frozenset({"npc-policy-63k"})


def is_model_path(name: str) -> bool:
    """Whether a device's `model` names a file (a team's .tflite) rather than a bundled fixture."""
    return name.endswith(".tflite") or "/" in name


def model_file(name: str, ext: str = "tflite", models_dir: Path = MODELS_DIR) -> Path:
    """The fixture file for model `name` (e.g. `npc-policy-int8`) with extension `ext` (`tflite` or `npcm`).
    `name` may also be the path of a team's own .tflite file (`hilbench nightly --model FILE`, or a fleet
    device's `model`): its .npcm is converted from it when asked for."""
    if is_model_path(name):
        return own_model(Path(name), ext)
    path = Path(models_dir) / f"{name}.{ext}"
    if not path.is_file():
        known = sorted(p.name for p in Path(models_dir).glob(f"*.{ext}"))
        raise ConfigError(
            f"model {name!r}: no file {path}",
            hint=f"known .{ext} models: {', '.join(known) or 'none'}; run `python fixtures/models/generate.py`",
        )
    return path


def converted_dir() -> Path:
    """Where .npcm conversions of teams' own models go: $TMPDIR/hilbench-models-UID, made and checked by
    `bench.core.folders` (this user's, mode 0700) each time it is used."""
    return own_folder(Path(tempfile.gettempdir()) / f"hilbench-models-{os.getuid()}", "model cache", private=True)


def own_model(path: Path, ext: str) -> Path:
    """A team's .tflite model (checked), or its .npcm conversion for MicroPython boards. The conversion is
    redone from the model's bytes each time (milliseconds); the file under the model's sha256 is used only
    when its bytes are the conversion's, else it is written again (a planted or altered file is never used)."""
    tflite = path
    hint = "give the path of a .tflite file"
    if tflite.suffix != ".tflite":
        raise ConfigError(f"model {tflite}: not a .tflite file", hint=hint)
    data = read_input(tflite, "model", hint=hint)
    if data[4:8] != b"TFL3":
        raise ConfigError(f"model {tflite}: not a TFLite model (no TFL3 file identifier)", hint="give a .tflite file")
    if ext == "tflite":
        return tflite
    from bench.models.npcm import convert_bytes

    try:
        converted = convert_bytes(data, str(tflite))
    except ConfigError as exc:
        why = str(exc).split("\n")[0].replace(f"model {tflite}: ", "")
        raise ConfigError(
            f"model {tflite}: cannot be converted to .npcm for MicroPython boards: {why}",
            hint="MCU kinds run int8 fully-connected policies; leave them out with --kind or --device",
        ) from None
    folder = own_folder(converted_dir() / hashlib.sha256(data).hexdigest(), "model cache", private=True)
    out = folder / f"{tflite.stem}.{ext}"
    if _sha256_of(out) != hashlib.sha256(converted).hexdigest():
        write_file(out, converted, what="model cache")  # another bench process may read it meanwhile
    return out


def _sha256_of(path: Path) -> str | None:
    """The sha256 of a regular file at `path` (no symbolic link followed), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return hashlib.sha256(fh.read()).hexdigest()


# the one table of model formats: format -> file extension
FORMAT_EXT = {"tflite-int8": "tflite", "tflite-f32": "tflite", "npcm-int8": "npcm"}
_QUANT_SUFFIXES = {"int8": "int8", "f32": "f32", "float32": "f32"}


def guess_name_and_format(path: Path) -> tuple[str, str]:
    """Name and format from a model file name: `npc-policy-int8-v2.tflite` -> (`npc-policy`, `tflite-int8`)."""
    containers = set(FORMAT_EXT.values())
    container = path.suffix.lstrip(".")
    if container not in containers:
        raise ConfigError(f"model {path}: unknown format {path.suffix!r}", hint="pass --format")
    stem = re.sub(r"[-_.]v\d+$", "", path.stem)
    for suffix, quant in _QUANT_SUFFIXES.items():
        if stem.endswith("-" + suffix):
            return stem[: -len(suffix) - 1], f"{container}-{quant}"
    return stem, container


def model_family(path: Path) -> str:
    """The model's name as its signed manifest carries it: the file name without version and format
    (`npc-policy-large-int8.npcm` -> `npc-policy-large`)."""
    return guess_name_and_format(path)[0]


def fleet_formats() -> dict[str, str]:
    """Format -> extension of every model format a registered kind runs by default."""
    return {fmt: FORMAT_EXT[fmt] for fmt in sorted({k.model_format for k in KINDS.values()})}


def kind_model(kind: str, settings: Settings | None = None, models_dir: Path = MODELS_DIR) -> tuple[Path, str]:
    """(model file, manifest format) a device of `kind` runs: its settings' `model`/`model_format` or the kind's."""
    settings = settings or get_kind(kind).defaults()
    fmt = settings.model_format
    if fmt not in FORMAT_EXT:
        raise ConfigError(f"model_format {fmt!r} of kind {kind}", hint=f"use one of {', '.join(FORMAT_EXT)}")
    return model_file(settings.model, FORMAT_EXT[fmt], models_dir), fmt


def fixture_manifest(path: Path, fmt: str) -> dict[str, Any]:
    """The unsigned manifest of a fixture model: name `npc-policy`, version 2 for the `-v2` files, else 1."""
    from bench.models.signing import model_manifest

    return model_manifest(Path(path), "npc-policy", 2 if Path(path).stem.endswith("-v2") else 1, fmt)

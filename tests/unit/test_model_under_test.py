"""A team's own model under test: `hilbench nightly --model FILE` and a fleet `model` that is a path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.core.errors import ConfigError
from bench.models import MODELS_DIR, kind_model, model_file
from bench.models.npcm import convert
from tests.conftest import REPO


def test_a_tflite_path_is_used_as_is_and_converted_for_micropython_boards(tmp_path: Path) -> None:
    mine = tmp_path / "team-policy.tflite"
    shutil.copy(MODELS_DIR / "npc-policy-large-int8.tflite", mine)
    assert model_file(str(mine)) == mine
    npcm = model_file(str(mine), "npcm")
    assert npcm.name == "team-policy.npcm" and npcm.read_bytes() == convert(mine)
    board = next(d for d in load_fleet(None) if d.kind == "esp32c6").with_settings(model=str(mine))
    assert kind_model(board.kind, board.settings)[0] == npcm


def test_a_model_that_cannot_run_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot be converted to \.npcm for MicroPython boards: .*not int8"):
        model_file(str(MODELS_DIR / "npc-policy-f32.tflite"), "npcm")
    with pytest.raises(ConfigError, match=r"not a \.tflite file"):
        model_file(str(REPO / "fixtures" / "sessions" / "combat.mcap"))
    fake = tmp_path / "fake.tflite"
    fake.write_bytes(b"\0" * 64)
    with pytest.raises(ConfigError, match="not a TFLite model"):
        model_file(str(fake))
    with pytest.raises(ConfigError, match=r"missing\.tflite does not exist"):
        model_file(str(tmp_path / "missing.tflite"))

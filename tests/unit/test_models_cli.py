"""`hilbench model fixtures|convert|check-fixtures` through the real CLI."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def hilbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench", "model", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_list_names_the_kind_defaults():
    proc = hilbench("fixtures", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["file"]: r for r in json.loads(proc.stdout)}
    assert rows["npc-policy-int8.npcm"]["kinds"] == ["esp32c6", "pi5", "switch-arm64", "web"]
    assert rows["npc-policy-large-int8.tflite"]["layers"] == "48-256-256-128-8"


def test_convert_reproduces_the_committed_npcm(tmp_path):
    target = tmp_path / "v2.npcm"
    proc = hilbench("convert", "fixtures/models/npc-policy-int8-v2.tflite", str(target), "--json")
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == (REPO / "fixtures/models/npc-policy-int8-v2.npcm").read_bytes()
    assert json.loads(proc.stdout)["size"] == target.stat().st_size


def test_convert_refuses_a_float_model_with_exit_2(tmp_path):
    proc = hilbench("convert", "fixtures/models/npc-policy-f32.tflite", str(tmp_path / "x.npcm"))
    assert proc.returncode == 2
    assert "npc-policy-f32.tflite" in proc.stderr and "not int8" in proc.stderr
    assert not (tmp_path / "x.npcm").exists()


def test_check_passes_on_the_committed_fixtures():
    proc = hilbench("check-fixtures", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"stale": []}

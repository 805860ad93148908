"""End to end: `hilbench bisect` over 8 ordered models on the virtual ESP32-C6 (real mpremote deploys, real
replays), one step of clearly more compute between model 3 and model 4: it names model 4 as the first bad build
in at most 3 steps of 3 replays, with its figure and model 3's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.models.policy import calibration_inputs, make_policy, quantize_policy
from bench.models.tflite_build import int8_graph, serialize
from bench.replay.recording import write_session
from bench.replay.synth import synth_session
from tests.conftest import hilbench

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # opt-in: 12 replays and 4 deploys (about 5 minutes on 2 cores)

SMALL, LARGE = (48, 64, 32, 8), (48, 192, 96, 8)  # 5.4k and 28k multiply-accumulates per inference


def models(folder: Path) -> Path:
    """model-1 .. model-8: retrains of one policy; from model 4 on, a wider one."""
    folder.mkdir()
    for n in range(1, 9):
        widths = SMALL if n <= 3 else LARGE
        mlp = make_policy(widths, f"bisect-policy/v{n}")
        q = quantize_policy(mlp, calibration_inputs(widths[0]))
        (folder / f"model-{n}.tflite").write_bytes(serialize(int8_graph(q), f"bisect-policy v{n} int8"))
    return folder


def test_bisect_finds_the_first_slow_model_in_at_most_3_steps(tmp_path: Path) -> None:
    series = models(tmp_path / "builds")
    session = tmp_path / "s.mcap"
    write_session(session, synth_session("combat", 7, duration_s=6.0))
    argv = hilbench("bisect", "--device", "c6-a", "--session", str(session), "--series", str(series),
                    "--metric", "inference_p50", "--reports", str(tmp_path / "reports"), "--json")  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout[proc.stdout.index('{\n  "device"') :])
    assert doc["first_bad"] == "model-4.tflite", doc
    assert doc["last_good"] == "model-3.tflite", doc
    judged = [s for s in doc["steps"] if s["status"] != "skipped"]
    assert len(doc["steps"]) <= 3 and all(len(s["runs"]) == 3 for s in judged), doc["steps"]
    bad = next(s for s in doc["steps"] if s["build"] == "model-4.tflite")
    good = next((s for s in doc["steps"] if s["build"] == "model-3.tflite"), doc["baseline"])
    slow, fast = bad["figures"]["inference_p50"]["value"], good["figures"]["inference_p50"]["value"]
    assert slow > 1.5 * fast, (slow, fast)

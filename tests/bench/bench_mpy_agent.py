"""Benchmark: per-inference time of the MicroPython agent in the unix VM (300 KB heap), and model sizes.

    python -m tests.bench bench_mpy_agent [--requests 200] [--frames 200]

Prints, for the viper kernel and for the pure-Python kernel: a bare `npcnn` inference in the VM (no
agent), the device-side time of `infer` requests and of frame-loop inferences (t1 - t0 of `frame`
records at 20 FPS, the esp32c6 kind's default; they include the feature vector), the agent's heap
figures, and the size of every fixture model.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bundles.mpy_board import agent_command
from bench.config.kinds import KINDS
from bench.core.paths import MODELS_DIR
from tests.e2e.mpy_agent_proc import MpyAgent, make_board, signed


def summary(values: list[int]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"mean {statistics.fmean(values):8.1f} us  median {statistics.median(values):8.1f} us  "
        f"p95 {p95:6d} us  max {max(values):6d} us  (n={len(values)})"
    )


BARE = """
import time, npcnn
model = npcnn.load("models/npc-policy-int8.npcm")
x = [((k * 37) % 100) / 50.0 - 1.0 for k in range(48)]
times = []
for _ in range(N):
    t0 = time.ticks_us()
    model.infer(x)
    times.append(time.ticks_diff(time.ticks_us(), t0))
print(" ".join(str(t) for t in times))
"""


def bare(board: Path, n: int) -> list[int]:
    (board / "bare.py").write_text(f"N = {n}\n" + BARE)
    argv = agent_command()[:-2]
    proc = subprocess.run([*argv, "bare.py"], cwd=board, capture_output=True, text=True, timeout=120, check=True)
    return [int(t) for t in proc.stdout.split()]


def run(kernel: str, requests: int, frames: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        board = make_board(Path(tmp), ("npc-policy-int8",))
        if kernel == "python":
            (board / "npcnn_viper.py").unlink()
        print(f"[{kernel}] bare npcnn inference (no agent): {summary(bare(board, requests))}")
        agent = MpyAgent(board)
        try:
            reply = agent.request(
                {"t": "load", "path": "models/npc-policy-int8.npcm", "manifest": signed(board, "npc-policy-int8", 1)}
            )
            assert reply["t"] == "loaded", reply
            print(
                f"[{kernel}] load: verify {reply['verify_us']} us (sha256 + ECDSA-P256 in MicroPython), "
                f"switch {reply['switch_us']} us"
            )
            x = [((k * 37) % 100) / 50.0 - 1.0 for k in range(48)]
            times = [agent.request({"t": "infer", "x": x})["us"] for _ in range(requests)]
            print(f"[{kernel}] infer request, device side: {summary(times)}")
            fps = KINDS["esp32c6"].defaults().fps_target
            vsync = KINDS["esp32c6"].defaults().vsync_hz
            agent.request({"t": "start", "fps": fps, "vsync_hz": vsync, "frames": frames})
            recs = [agent.wait_for("frame", timeout=30) for _ in range(frames)]
            agent.wait_for("stopped", timeout=30)
            ran = [r["t1"] - r["t0"] for r in recs if r["ran"]]
            late = sum(1 for r in recs if r["late"])
            print(f"[{kernel}] frame loop {fps} FPS: {summary(ran)}; late {late}/{frames}")
            stats = agent.request({"t": "stats"})
            print(
                f"[{kernel}] heap in use {stats['mem']} B, peak {stats['mem_peak']} B, free {stats['mem_free']} B; "
                f"model file {stats['model_bytes']} B, weights+params {stats['weight_bytes']} B"
            )
        finally:
            agent.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--frames", type=int, default=200)
    args = parser.parse_args()
    print("model sizes:")
    for path in sorted(MODELS_DIR.glob("*.tflite")) + sorted(MODELS_DIR.glob("*.npcm")):
        print(f"  {path.stat().st_size:>9} B  {path.name}")
    for kernel in ("viper", "python"):
        run(kernel, args.requests, args.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())

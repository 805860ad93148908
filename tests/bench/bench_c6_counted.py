"""Benchmark: policies' inference time on the virtual ESP32-C6's counted core, next to the silicon's.

Flashes the counted firmware (built from its pinned source, `bench.bundles.c6_firmware`) onto a virtual
board, copies the agent's inference code (`npcnn`) and the models with mpremote, and times inference on the
board's own counted clock (`time.ticks_us`: one RV32 instruction per cycle of 160 MHz), with the viper
kernels (RV32 native code) and without, each inference on a freshly collected heap (as the agent collects
after every frame). By default the bundled policy and the seed-sized one (`npc-policy-63k-int8`, the size of
the seed's smallest C6 model, whose published mean on the chip is 24.6 ms). Prints one JSON line per (model,
kernel): the model's size, the heap left free with it loaded, the median and every run. Counted time does
not depend on the host's load, so the figures are the same on a busy host; the count leaves out the chip's
flash cache misses and its CPI above 1 (docs/esp32c6.md).

Run: .venv/bin/python -m tests.bench bench_c6_counted [--model NAME ...] [--runs 7] [--elf PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.bundles.c6_firmware import build_firmware, image_for
from tests.esp32c6_support import run_on_fresh_board

REPO = Path(__file__).resolve().parents[2]

SEED_MEAN_MS = 24.6  # the product's published mean inference on an ESP32-C6 at 160 MHz, its smallest model
MODELS = ("npc-policy-int8", "npc-policy-63k-int8")
CODE = """
import gc, time, npcnn
x = [((i * 37) % 17 - 8) / 8 for i in range(48)]
for name in {models!r}:
    for native in (True, False):
        m = npcnn.load(name + '.npcm', native)
        gc.collect()
        free = gc.mem_free()
        m.infer(x)
        ts = []
        for k in range({runs}):
            gc.collect()
            t = time.ticks_us(); m.infer(x); ts.append(time.ticks_diff(time.ticks_us(), t))
        print(name, 'viper' if native else 'plain', free, ' '.join(str(t) for t in ts))
        m = None
        gc.collect()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help=f"fixtures/models/<model>.npcm (default: {', '.join(MODELS)})")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--elf", type=Path, help="a built firmware ELF (default: build or reuse the cached one)")
    args = parser.parse_args()
    models = tuple(args.model or MODELS)
    paths = {name: REPO / "fixtures" / "models" / f"{name}.npcm" for name in models}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        print(f"no such model: {', '.join(missing)} (see fixtures/models/)", file=sys.stderr)
        return 2
    image = image_for(args.elf or build_firmware().elf)
    files = [*(REPO / "micropython" / n for n in ("npcfeat.py", "npcnn.py", "npcnn_viper.py")), *paths.values()]
    try:
        ran = run_on_fresh_board(image.read_bytes(), files, CODE.format(models=models, runs=args.runs))
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 3
    if ran.returncode != 0:
        print(f"the board could not run the model: {ran.stdout.strip()[-500:]}", file=sys.stderr)
        return 1
    for line in ran.stdout.strip().splitlines():
        name, kernel, free, *times = line.split()
        runs_us = [int(t) for t in times]
        median = sorted(runs_us)[len(runs_us) // 2]
        figures = {"model": name, "bytes": paths[name].stat().st_size, "kernel": kernel,
                   "clock": "counted: RV32 at the chip's 160 MHz", "heap_free_loaded": int(free),
                   "median_ms": median / 1000, "runs_us": runs_us, "seed_mean_ms": SEED_MEAN_MS}  # fmt: skip
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the web agent in headless Chromium against the product's Web SDK figures (product.md).

Prints, next to their goals:
- inference mean and P95 in the page (the agent's whole `infer`: quantize, LiteRT.js run, dequantize, output
  check), and LiteRT.js's bare `run` for comparison: goal mean 7.9 ms, P95 <= 8.2 ms;
- the gzipped size of what a page downloads (page + agent modules + LiteRT.js JS, then the WASM build it
  loads), goal 98 KB gzipped;
- a frame run under requestAnimationFrame at 60 FPS: achieved FPS and frame-start jitter as the nightly computes
  them (bench.measure.frames), the browser's rAF interval and its jitter, late and skipped frames.

    python -m tests.bench bench_web [--frames 600] [--infers 2000]
    python -m tests.bench bench_web --size-only   # the page size alone: no browser, the same on every run
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import tempfile
from pathlib import Path

import numpy as np

from bench.agent.session import AgentSession, LoopStart
from bench.browser.assets import bundle_files
from bench.browser.browser import Browser
from bench.browser.deploy import deploy_storage
from bench.browser.pages import PageServer
from bench.measure.frames import frame_timing

ROOT = Path(__file__).resolve().parents[2]
GOAL_MEAN_MS, GOAL_P95_MS, GOAL_GZ_KB = 7.9, 8.2, 98

TIMING_JS = """
(async () => {
  const a = window.npcAgent, m = a.models.current, x = new Array(48).fill(0).map((_, k) => Math.sin(k) * 0.8);
  const agent = [], bare = [];
  for (let k = 0; k < 50; k++) await m.infer(x);
  for (let k = 0; k < %d; k++) {
    const t0 = performance.now(); await m.infer(x); agent.push(performance.now() - t0);
  }
  const lt = await import("@litertjs/core");
  const t = new lt.Tensor(new Int8Array(48), [1, 48]);
  for (let k = 0; k < %d; k++) {
    const t0 = performance.now(); const out = await m.compiled.run(t); bare.push(performance.now() - t0);
    out.forEach((o) => o.delete());
  }
  t.delete();
  return {agent, bare, isolated: self.crossOriginIsolated};
})()
"""


def gz_sizes() -> dict[str, tuple[int, int]]:
    """(raw bytes, gzipped bytes) of what a page downloads, by part: the page and agent, LiteRT.js, its Emscripten
    glue (JS), and the WASM build."""
    parts: dict[str, tuple[int, int]] = {}
    for path in bundle_files():
        data = path.read_bytes()
        part = "WASM" if path.suffix == ".wasm" else "its Emscripten glue" if path.parent.name == "wasm" else (
            "LiteRT.js" if "node_modules" in path.parts else "page and agent")  # fmt: skip
        raw, packed = parts.get(part, (0, 0))
        parts[part] = (raw + len(data), packed + len(gzip.compress(data, 9)))
    return parts


def print_sizes() -> None:
    """The page-size lines: the bundle against the goal, and the gzipped JS by part."""
    parts = gz_sizes()
    raw = sum(r for r, _ in parts.values())
    wasm = parts.get("WASM", (0, 0))[1]
    js = {name: packed for name, (_, packed) in parts.items() if name != "WASM"}
    print(
        f"bundle: {raw / 1024:.0f} KB raw; gzipped: JS {sum(js.values()) / 1024:.1f} KB + WASM {wasm / 1024:.0f} KB"
        f" = {(sum(js.values()) + wasm) / 1024:.0f} KB (goal {GOAL_GZ_KB} KB gzipped)"
    )
    print("gzipped JS: " + ", ".join(f"{name} {packed / 1024:.1f} KB" for name, packed in js.items()))


async def run(frames: int, infers: int) -> None:
    print_sizes()
    with tempfile.TemporaryDirectory() as tmp:
        deploy_storage(Path(tmp), ROOT / "fixtures" / "models" / "npc-policy-int8.tflite", mem_limit_mb=256)
        async with PageServer() as pages, Browser() as browser:
            assert browser.cdp is not None
            page = await browser.cdp.open_page(pages.add_device("bench", Path(tmp)), lambda _text: None)
            session = await AgentSession.open(await pages.accept("bench", 60), device="bench")
            print(f"{session.info['runtime']} in {browser.version}")
            res = await page.evaluate(TIMING_JS % (infers, infers))
            agent, bare = np.array(res["agent"]), np.array(res["bare"])
            print(
                f"inference ({infers}x, npc-policy-int8, timer {'5 us' if res['isolated'] else '100 us'}): "
                f"agent mean {agent.mean():.3f} ms, P95 {np.percentile(agent, 95):.3f} ms "
                f"(goal mean {GOAL_MEAN_MS} ms, P95 <= {GOAL_P95_MS} ms); "
                f"LiteRT.js run alone mean {bare.mean():.3f} ms, P95 {np.percentile(bare, 95):.3f} ms"
            )
            await session.start(LoopStart(fps=60, vsync_hz=60, frames=frames))
            recs = [r async for r in session.frames(timeout=15)]
            stats = await session.stats()
            timing = frame_timing(recs)
            print(
                f"frames under rAF ({len(recs)} at 60 FPS): {timing.fps:.2f} FPS, "
                f"frame-start jitter std {timing.jitter_std_us:.0f} us, P99 {timing.jitter_p99_us:.0f} us; "
                f"rAF interval {stats.get('raf_interval_us')} us, jitter {stats.get('raf_jitter_us')} us; "
                f"late {sum(r.late for r in recs)}, skipped {sum(r.skip for r in recs)}, "
                f"timer frames {stats.get('timer_frames')}"
            )
            await session.shutdown()
            await session.close()
            await page.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=600)
    p.add_argument("--infers", type=int, default=2000)
    p.add_argument("--size-only", action="store_true", help="print the page size only (no browser)")
    args = p.parse_args()
    if args.size_only:
        print_sizes()
    else:
        asyncio.run(run(args.frames, args.infers))


if __name__ == "__main__":
    main()

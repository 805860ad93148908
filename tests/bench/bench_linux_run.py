"""Benchmark: the host agent on a virtual Jetson and a virtual Pi 5, driven through real sshd.

Per board: time to flash (connect, runtime check, deploy) cold and warm, time to start the agent and get
its hello, then a frame run at the kind's fps target; prints achieved FPS, frame-start jitter and inference time
P50/P99 as the nightly computes them (bench.measure: frame_timing, inference_latency), and how many telemetry
samples arrived meanwhile.

    python -m tests.bench bench_linux_run [--frames 600]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tempfile
import time

from bench.agent.session import AgentSession, LoopStart
from bench.config.fleet import load_fleet
from bench.devices.linux import LinuxDriver
from bench.measure.frames import frame_timing
from bench.measure.latency import inference_latency
from bench.virtual import virtual_fleet


async def one(device, frames: int) -> None:
    fps = device.settings.fps_target
    driver = LinuxDriver(device)
    try:
        t = time.perf_counter()
        await driver.flash()
        cold = time.perf_counter() - t
        t = time.perf_counter()
        await driver.flash()
        warm = time.perf_counter() - t
        t = time.perf_counter()
        session = await AgentSession.open(await driver.open_agent(), device=device.name)
        start = time.perf_counter() - t
        monitor = await driver.telemetry()
        async with monitor:
            await session.start(LoopStart(fps=fps, vsync_hz=device.settings.vsync_hz, frames=frames))
            recs = [r async for r in session.frames(timeout=10)]
        await session.close()
    finally:
        await driver.close()
    timing, infer = frame_timing(recs), inference_latency(recs)
    print(
        f"{device.name} ({device.kind}, target {fps} FPS): flash cold {cold * 1e3:.0f} ms, warm {warm * 1e3:.0f} ms; "
        f"agent start + hello {start * 1e3:.0f} ms; {len(recs)} frames: {timing.fps:.2f} FPS, "
        f"jitter std {timing.jitter_std_us:.0f} us, P99 {timing.jitter_p99_us:.0f} us; "
        f"inference P50 {infer.percentile(50):.0f} us, P99 {infer.percentile(99):.0f} us; "
        f"{len(monitor.samples)} telemetry samples"
    )


async def main(frames: int) -> None:
    devices = [dataclasses.replace(d, os=None) for d in load_fleet() if d.kind in ("jetson-orin-nx", "pi5")]  # loopback
    async with virtual_fleet(devices) as (resolved, _running):
        for dev in resolved:
            await one(dev, frames)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=600)
    args = parser.parse_args()
    os.environ.setdefault("HILBENCH_STATE_DIR", tempfile.mkdtemp(prefix="hilbench-bench-"))
    asyncio.run(main(args.frames))

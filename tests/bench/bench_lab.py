"""Benchmark: acquire/release through labgrid, and what the ser2net-safe serial URL costs esptool.

Starts a real labgrid coordinator and one bench host (`hilbench lab serve`, two virtual ESP32-C6) on
loopback, syncs the places, then times N cycles of: connecting a session, acquiring a place by name
(AcquirePlace + reading its link from the published resources), releasing it, and reserving a place by
tags then acquiring it; plus `bench.lab.acquire.lab_devices` whole (connect, acquire, link, release).
Last, `esptool chip-id` on one board through `rfc2217://...?ign_set_control` (the URL a place yields)
against plain `rfc2217://` (pyserial waits 100 ms per DTR/RTS change without the server's answer).

Run: .venv/bin/python -m tests.bench bench_lab [--cycles 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.config.fleet import load_fleet
from bench.lab.acquire import lab_devices
from bench.lab.client import LabClient

REPO = Path(__file__).resolve().parents[2]

FLEET = """
[bench]
name = "lab-bench"
[lab]
coordinator = "127.0.0.1:{port}"
[[device]]
name = "c6-a"
kind = "esp32c6"
virtual = true
place = "bench-c6-a"
lab_host = "bench-a"
lab_tags = {{ board = "esp32c6" }}
[[device]]
name = "c6-b"
kind = "esp32c6"
virtual = true
place = "bench-c6-b"
lab_host = "bench-a"
lab_tags = {{ board = "esp32c6" }}
"""


def ms(values: list[float]) -> str:
    """median / p95 / max in ms."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1e3:7.1f} ms  p95 {p95 * 1e3:7.1f} ms  max {ordered[-1] * 1e3:7.1f} ms"
    )


async def cycles(address: str, fleet_path: Path, n: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in ("connect", "acquire", "release", "reserve+acquire", "whole")}
    for i in range(n):
        t0 = time.perf_counter()
        async with LabClient(address, "bench-host", f"hb.bench.{os.getpid()}.{i}") as client:
            times["connect"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await client.acquire("bench-c6-a", time.monotonic() + 10)
            await client.refresh()
            assert client.place_resources("bench-c6-a")
            times["acquire"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await client.release("bench-c6-a")
            times["release"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            token, place = await client.reserve({"board": "esp32c6"}, time.monotonic() + 10)
            await client.acquire(place, time.monotonic() + 10)
            times["reserve+acquire"].append(time.perf_counter() - t0)
            await client.release(place)
            await client.cancel(token)
    fleet = load_fleet(fleet_path)
    for _ in range(n):
        t0 = time.perf_counter()
        async with lab_devices([fleet.get("c6-a")]):
            pass
        times["whole"].append(time.perf_counter() - t0)
    return times


def chip_id(url: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "esptool", "--port", url, "chip-id"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"esptool chip-id on {url} failed: {done.stdout[-500:]}{done.stderr[-500:]}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lab-") as tmp:
        root = Path(tmp)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        fleet = root / "lab.toml"
        fleet.write_text(FLEET.format(port=port))
        env = {**os.environ, "HILBENCH_STATE_DIR": str(root / "state")}
        coordinator = subprocess.Popen(
            [sys.executable, "-m", "labgrid.remote.coordinator", "-l", f"127.0.0.1:{port}"],
            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        serve = None
        try:
            time.sleep(1.0)
            serve = subprocess.Popen(
                [sys.executable, "-m", "bench", "lab", "serve", "--fleet", str(fleet), "--host", "bench-a", "--json"],
                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
            )  # fmt: skip
            text = ""
            for line in serve.stdout:
                text += line
                with contextlib.suppress(ValueError):
                    urls = json.loads(text)["devices"]
                    break
            subprocess.run([sys.executable, "-m", "bench", "lab", "sync", "--fleet", str(fleet)], cwd=REPO,
                           check=True, capture_output=True, env=env)  # fmt: skip
            times = asyncio.run(cycles(f"127.0.0.1:{port}", fleet, args.cycles))
            print(f"labgrid 26.0.1, loopback, {args.cycles} cycles each")
            for name, values in times.items():
                print(f"  {name:<16} {ms(values)}")
            plain = [chip_id(urls["c6-b"]) for _ in range(3)]
            ign = [chip_id(urls["c6-b"] + "?ign_set_control") for _ in range(3)]
            print("esptool chip-id on a virtual board (3 runs, median):")
            print(f"  rfc2217://                  {statistics.median(plain):.2f} s")
            print(f"  rfc2217://?ign_set_control  {statistics.median(ign):.2f} s")
        finally:
            if serve is not None:
                serve.send_signal(signal.SIGTERM)
                serve.wait(timeout=20)
            coordinator.terminate()
            coordinator.wait(timeout=10)


if __name__ == "__main__":
    main()

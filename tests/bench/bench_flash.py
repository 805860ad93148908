"""Benchmark: flashing virtual ESP32-C6 boards in parallel at a simulated 921600 baud.

Prints: `hilbench flash` wall time for 1, 4 and 8 boards at once (fresh flash each time, so every
board really writes), the ratio T(8)/T(1), and on one board `hilbench flash` (firmware + agent
deploy, and the firmware step alone) against a bare `esptool write-flash` of the same image.
Boards pace their ROM/stub traffic at the baud rate on the wire (`wire_speed = true`), and are
reached over RFC 2217 like a remote board (pyserial's RFC 2217 client adds ~0.2 s per command).

Run: .venv/bin/python -m tests.bench bench_flash [--image-kb 1000] [--counts 1 4 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from make_virtual_firmware import build

from tests.esp32c6_support import virtual_c6

REPO = Path(__file__).resolve().parents[2]

BAUD = 921600


def fleet_of_virtual(path: Path, count: int) -> Path:
    lines = []
    for i in range(count):
        lines += ["[[device]]", f'name = "bench-c6-{i}"', 'kind = "esp32c6"', "virtual = true", "wire_speed = true"]
        lines += [f"baud = {BAUD}", f'mac = "60:55:f9:c6:b0:{i:02x}"', ""]
    path.write_text("\n".join(lines))
    return path


def hilbench_flash(fleet: Path, image: Path, logs: Path, env: dict[str, str]) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "bench", "flash", "--fleet", str(fleet), "--firmware", str(image), "--json"]
    started = time.monotonic()
    done = subprocess.run([*argv, "--logs", str(logs)], cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"hilbench flash failed:\n{done.stdout}\n{done.stderr}")
    return seconds, json.loads(done.stdout)


def parallel(counts: list[int], image: Path, work: Path) -> dict[int, float]:
    times: dict[int, float] = {}
    for count in counts:
        env = {**os.environ, "HILBENCH_STATE_DIR": str(work / f"state-{count}")}  # blank boards each time
        fleet = fleet_of_virtual(work / f"fleet-{count}.toml", count)
        wall, report = hilbench_flash(fleet, image, work / f"logs-{count}", env)
        slowest = max(d["seconds"] for d in report["devices"])
        firmware = max(d["steps"][0]["seconds"] for d in report["devices"])
        times[count] = wall
        print(f"T({count}) = {wall:6.1f} s wall   (slowest board {slowest:5.1f} s, firmware step {firmware:5.1f} s)")
    return times


def versus_esptool(image: Path, work: Path) -> None:
    with virtual_c6(work / "one", name="bench-one", mac="60:55:f9:c6:b1:00", wire_speed=True) as board:
        url = board.urls["rfc2217"]
        argv = [sys.executable, "-m", "esptool", "--port", url, "--baud", str(BAUD), "write-flash", "0x0", str(image)]
        started = time.monotonic()
        bare = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        t_esptool = time.monotonic() - started
        if bare.returncode != 0:
            raise SystemExit(f"esptool failed:\n{bare.stdout}\n{bare.stderr}")
        erase = [sys.executable, "-m", "esptool", "--port", url, "erase-region", "0x0", "0x1000"]
        subprocess.run(erase, cwd=REPO, capture_output=True, check=True)  # make the image differ again
        fleet = work / "one.toml"
        fleet.write_text(f'[[device]]\nname = "bench-one"\nkind = "esp32c6"\nport = "{url}"\nbaud = {BAUD}\n')
        t_hilbench, report = hilbench_flash(fleet, image, work / "logs-one", dict(os.environ))
        steps = {s["step"]: s["seconds"] for s in report["devices"][0]["steps"]}
        t_again, _ = hilbench_flash(fleet, image, work / "logs-again", dict(os.environ))
    print(f"bare esptool write-flash:          {t_esptool:6.1f} s")
    print(f"hilbench flash (firmware + agent): {t_hilbench:6.1f} s   ratio {t_hilbench / t_esptool:.2f}")
    print(f"  firmware step alone:             {steps['firmware']:6.1f} s   ratio {steps['firmware'] / t_esptool:.2f}")
    print(f"  agent deploy step:               {steps['agent']:6.1f} s")
    print(f"hilbench flash, already up to date: {t_again:5.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image-kb", type=int, default=1000, help="firmware image size (default 1000 KB)")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 4, 8])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flash-") as tmp:
        work = Path(tmp)
        image = work / "firmware.bin"
        image.write_bytes(build(pad=args.image_kb * 1000))
        print(f"image: {image.stat().st_size} bytes, simulated wire {BAUD} baud, boards over rfc2217://")
        times = parallel(args.counts, image, work)
        if 1 in times and max(times) != 1:
            top = max(times)
            print(f"T({top})/T(1) = {times[top] / times[1]:.2f}")
        versus_esptool(image, work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Figures for Linux-board OS provisioning on the virtual aarch64 guests, and the nightly's wall time on the
bundled fleet against its goal (10 minutes on the 2-core development host).

    python -m tests.bench bench_linux_os provision [--kind pi5]   # image build, flash --os twice
    python -m tests.bench bench_linux_os nightly                    # the whole nightly, per stage

Each part runs the real CLI in a fresh state folder (blank guest disks), so the first `flash --os` writes
the image and the second finds the board up to date.
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

REPO = Path(__file__).resolve().parent.parent.parent
NIGHTLY_GOAL_S = 600.0


def hilbench(*args: str, env: dict[str, str]) -> tuple[float, dict]:
    """Run `hilbench ARGS --json`; (wall seconds, its JSON)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "bench", *args, "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.monotonic() - started
    try:
        return seconds, json.loads(proc.stdout)
    except ValueError:
        sys.exit(f"hilbench {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def provision(kind: str, env: dict[str, str], tmp: Path) -> None:
    """Build (or reuse) the image, then flash --os a blank guest twice."""
    seconds, image = hilbench("image", "build", kind, env=env)
    print(f"image build {kind}: {seconds:.1f} s ({'built' if image['built'] else 'cached'}), "
          f"disk {image['disk_bytes'] / 1e6:.0f} MB sparse, rootfs {image['rootfs_bytes'] / 1e6:.0f} MB")  # fmt: skip
    fleet = tmp / "fleet.toml"
    fleet.write_text(
        f'[[device]]\nname = "{kind}-bench"\nkind = "{kind}"\nvirtual = true\n[device.os]\nimage = "build"\n'
    )
    for label in ("blank board", "up to date"):
        seconds, doc = hilbench("flash", "--os", "--fleet", str(fleet), "--logs", str(tmp / "logs"), env=env)
        (dev,) = doc["devices"]
        os_step = next(s for s in dev["steps"] if s["step"] == "os")
        f = os_step["figures"]
        parts = ", ".join(f"{k} {f[k]} s" for k in ("write_s", "verify_s", "boot_s") if k in f)
        print(f"flash --os ({label}): {seconds:.1f} s wall incl. guest start; os step {os_step['seconds']:.1f} s"
              f"{' (skipped)' if os_step['skipped'] else ''}{': ' + parts if parts else ''}")  # fmt: skip


def nightly(env: dict[str, str], tmp: Path) -> None:
    """The whole nightly on the bundled fleet, from blank guest disks."""
    seconds, doc = hilbench("nightly", "--reports", str(tmp / "reports"), "--results", str(tmp / "r.sqlite"), env=env)
    for stage in doc["stages"]:
        print(f"  {stage['name']:<8} {stage['seconds']:7.1f} s  {'ok' if stage['ok'] else 'FAILED'}")
    verdict = "within" if seconds <= NIGHTLY_GOAL_S else "OVER"
    print(f"nightly: {seconds:.0f} s wall (goal <= {NIGHTLY_GOAL_S:.0f} s: {verdict}); load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("provision", "nightly"))
    parser.add_argument("--kind", default="pi5", choices=("pi5", "jetson-orin-nx"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-linux-os-") as tmp:
        env = {**os.environ, "HILBENCH_STATE_DIR": f"{tmp}/state", "HILBENCH_LEASE_DIR": f"{tmp}/leases"}
        if args.part == "provision":
            provision(args.kind, env, Path(tmp))
        else:
            nightly(env, Path(tmp))


if __name__ == "__main__":
    main()

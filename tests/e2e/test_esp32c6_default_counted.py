"""A user's own virtual ESP32-C6, given no `firmware`, runs the counted firmware: `hilbench flash` writes the
counted image, and the board runs it on qemu-system-riscv32 (the chip's MicroPython on the chip's clock), not the
unix-port VM on the host's."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.bundles.c6_firmware import build_firmware, image_for
from bench.virtual.esp32c6.control import control_request
from tests.conftest import hilbench
from tests.esp32c6_support import REPO, mpremote, qemu_pids

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
FLEET = '[[device]]\nname = "c6-mine"\nkind = "esp32c6"\nvirtual = true\nmac = "60:55:f9:c6:70:01"\n'


def test_a_virtual_c6_without_firmware_runs_the_counted_core(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET, encoding="utf-8")
    state = tmp_path / "state"
    env = {**os.environ, "HILBENCH_STATE_DIR": str(state)}
    flashed = subprocess.run(
        hilbench("flash", "--fleet", str(fleet), "--json", "--logs", str(tmp_path / "logs")),
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert flashed.returncode == 0, flashed.stdout + flashed.stderr
    assert json.loads(flashed.stdout)["ok"]
    image = image_for(build_firmware().elf).read_bytes()
    assert (state / "c6-mine" / "flash.bin").read_bytes()[: len(image)] == image

    up = subprocess.Popen(
        hilbench("virtual", "up", "--fleet", str(fleet), "--json"),
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        urls = json.loads(up.stdout.readline())["urls"]
        assert control_request(urls["control"], "status")["mode"] in ("boot-loop", "app")
        ran = mpremote("connect", urls["socket"], "exec", "import os; print(os.uname().version)")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "qemu-icount" in ran.stdout  # the counted firmware's build
        assert qemu_pids(state)  # its app runs in qemu-system-riscv32
    finally:
        up.terminate()
        up.wait(timeout=30)

"""Every device command holds its device's lease: a second command waits, or exits 3 naming the holder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from tests.conftest import REPO, hilbench

HOLDER = """
import sys, time
from bench.core.leases import LeaseSet
leases = LeaseSet(holder="hilbench replay")
leases.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
leases.release_all()
print("released", flush=True)
time.sleep(60)
"""


def _holder(device: str, hold_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, device, str(hold_s)], cwd=REPO, stdout=subprocess.PIPE,
                            text=True, env=os.environ.copy())  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture(scope="module")
def ota_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model store with npc-policy v1 published for the ESP32-C6's format."""
    store = tmp_path_factory.mktemp("ota-store")
    model = REPO / "fixtures" / "models" / "npc-policy-int8.npcm"
    key = REPO / "fixtures" / "keys" / "dev-model-signing.key.pem"
    run = subprocess.run(hilbench("model", "publish", str(model), "--key", str(key), "--name", "npc-policy",
                                  "--store", str(store)), cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return store


DEVICE_COMMANDS = [
    ("flash", "--device", "c6-a"),
    ("update", "--device", "c6-a", "--model", "npc-policy", "--store", "{store}"),
    ("replay", "--device", "c6-a", "--session", str(REPO / "fixtures" / "sessions" / "combat.mcap")),
    ("nightly", "--device", "c6-a"),
    ("virtual", "up", "--device", "c6-a"),
    ("linux", "check", "--device", "pi5-1"),
    ("linux", "telemetry", "--device", "pi5-1"),
    ("fleet", "check", "--device", "c6-a"),
    ("fleet", "health", "--device", "c6-a"),
]


@pytest.mark.parametrize("argv", DEVICE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_busy_device_exits_3_naming_the_holder(argv: tuple[str, ...], ota_store: Path) -> None:
    argv = tuple(a.replace("{store}", str(ota_store)) for a in argv)
    device = argv[argv.index("--device") + 1]
    holder = _holder(device, 600)
    try:
        t0 = time.monotonic()
        run = subprocess.run(hilbench(*argv, "--lease-wait", "1"), cwd=REPO, capture_output=True, text=True,
                             timeout=120, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
        waited = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == ExitCode.UNREACHABLE, run.stdout + run.stderr
    text = " ".join(run.stderr.split())
    assert f"device '{device}' is busy: held by hilbench replay (pid {holder.pid} " in text, text
    assert " since " in text and "Traceback" not in run.stderr
    assert waited >= 1.0


def _flash(tmp_path: Path, tag: str, *extra: str) -> subprocess.Popen[str]:
    argv = hilbench("flash", "--device", "c6-a", "--json", "--logs", str(tmp_path / tag), *extra)
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HILBENCH_STATE_DIR": str(tmp_path / "state")})  # fmt: skip


@pytest.mark.e2e
def test_two_flashes_of_one_board_run_one_after_the_other(tmp_path: Path) -> None:
    """Both flash; the second waited for the first, so it finds the board already flashed (up to date)."""
    first = _flash(tmp_path, "one", "--lease-wait", "300")
    time.sleep(0.5)
    second = _flash(tmp_path, "two", "--lease-wait", "300")
    outs = [p.communicate(timeout=600) for p in (first, second)]
    assert (first.returncode, second.returncode) == (0, 0), outs
    docs = [json.loads(o) for o, _ in outs]
    up_to_date = sorted(d["devices"][0]["up_to_date"] for d in docs)
    assert up_to_date == [False, True], docs  # one wrote the board, the other found it done


@pytest.mark.e2e
@pytest.mark.slow  # opt-in (--run-slow): two flashes of one board, above, show the same wait by default
def test_a_flash_waits_for_a_replay_to_release_the_board(tmp_path: Path) -> None:
    holder = _holder("c6-a", 4)
    try:
        t0 = time.monotonic()
        flash = _flash(tmp_path, "one", "--lease-wait", "120")
        out, err = flash.communicate(timeout=600)
        assert flash.returncode == 0, out + err
        assert holder.stdout is not None and holder.stdout.readline().strip() == "released"
        assert time.monotonic() - t0 >= 3.5  # it waited for the holder
    finally:
        holder.kill()
        holder.wait()

"""End to end, the issue's repro: `hilbench replay --device c6-a` with the board's VM frozen (SIGSTOP) 4 s
into a 12 s combat session. The ladder brings it back; the device is reported as an infrastructure failure
("recovered by <step>"), never "ok", and the command exits 3."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from bench.replay.recording import write_session
from bench.replay.synth import synth_session
from tests.conftest import hilbench

pytestmark = pytest.mark.e2e


def _vm_pids(state_dir: str, device: str) -> list[int]:
    """The processes that run virtual board `device`'s firmware: the counted core's QEMU (on the core.elf in its
    folder under the state dir) or the unix-port MicroPython VM (on its fs folder there)."""
    folder = Path(state_dir) / device
    pids = []
    for pattern in (f"qemu-system-riscv32.*{folder / 'core.elf'}", f"micropython_unix.*{folder / 'fs'}"):
        out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
        pids += [int(p) for p in out.stdout.split()]
    return pids


def _frames(results: Path) -> int:
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(results)) as db:
        return db.execute("SELECT COUNT(*) FROM frames").fetchone()[0]
    return 0


def _freezing_c6_a(argv: list[str], results: Path, *, frames: int, settle_s: float, wait_s: float, timeout_s: float):
    """Run `argv`; once `results` holds `frames` frame rows (or `wait_s` passed) and `settle_s` more seconds,
    SIGSTOP c6-a's VM processes until the command ends, then let them go: (its exit code, stdout, stderr) and
    the pids it froze. A command that ends before any frame fails the test."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped: list[int] = []
    try:
        deadline = time.monotonic() + wait_s
        while _frames(results) < frames and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if proc.poll() is not None:
            stdout, stderr = proc.communicate()
            raise AssertionError(f"ended before {frames} frames (exit {proc.returncode}): {stdout[-1500:]}")
        time.sleep(settle_s)
        stopped = _vm_pids(os.environ["HILBENCH_STATE_DIR"], "c6-a")
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        stdout, stderr = proc.communicate(timeout=timeout_s)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (proc.returncode, stdout, stderr), stopped


def test_replay_with_the_board_vm_frozen_mid_session_is_an_infrastructure_failure(tmp_path: Path) -> None:
    # flashed first, so that the replay starts on an answering board whatever ran on this worker before (a blank
    # board would first cost the whole ladder up to its reflash: test_recovery.py's opt-in test climbs it)
    flashed = subprocess.run(hilbench("flash", "--device", "c6-a", "--output-dir", str(tmp_path / "flash"), "--json"),
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert flashed.returncode == 0, flashed.stdout[-2000:] + flashed.stderr[-2000:]
    session = tmp_path / "s.mcap"  # the session goes on from where the board froze once the ladder brought it back
    write_session(session, synth_session("combat", 11, duration_s=8.0))
    results = tmp_path / "r.sqlite"
    argv = hilbench("replay", "--device", "c6-a", "--session", str(session),
                    "--results", str(results), "--logs", str(tmp_path / "logs"), "--json")  # fmt: skip
    (code, stdout, stderr), stopped = _freezing_c6_a(argv, results, frames=1, settle_s=4.0, wait_s=240, timeout_s=300)
    assert stopped, "no firmware process for c6-a"
    assert code == 3, (code, stderr[-2000:])
    doc = json.loads(stdout[stdout.index('{\n  "run_id"') :])
    assert doc["status"] == "failed"
    (dev,) = doc["devices"]
    outcome = dev["outcome"]
    assert outcome["class"] == "infrastructure failure", outcome
    assert outcome["label"].startswith("infrastructure: recovered by "), outcome
    with contextlib.closing(sqlite3.connect(results)) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM device_events WHERE event = 'recovered'")]
    assert outcome["label"].removeprefix("infrastructure: recovered by ") == steps[-1]


@pytest.mark.slow  # opt-in: a whole reduced nightly with a hang, a recovery and a retry (about 3 minutes)
def test_a_nightly_board_hung_mid_replay_is_infrastructure_and_passes_on_retry(tmp_path: Path) -> None:
    session = tmp_path / "s.mcap"
    write_session(session, synth_session("combat", 11, duration_s=24.0))
    results, reports = tmp_path / "r.sqlite", tmp_path / "reports"
    argv = hilbench("nightly", "--device", "c6-a", "--session", str(session), "--results", str(results),
                    "--reports", str(reports), "--skip", "update", "--skip", "faults", "--json")  # fmt: skip
    (code, stdout, stderr), stopped = _freezing_c6_a(argv, results, frames=40, settle_s=0, wait_s=300, timeout_s=600)
    assert stopped, "no firmware process for c6-a"
    doc = json.loads(stdout[stdout.index('{\n  "started"') :])
    outcome = doc["outcomes"]["c6-a"]
    assert outcome["passed_on_retry"], outcome
    assert outcome["first_try"].startswith("infrastructure: "), outcome  # recovered by a step, or lost at the stop
    assert code == 0 and doc["exit_code"] == 0, stderr[-2000:]
    assert doc["retries"], doc["retries"]
    (health,) = [h for h in doc["health"] if h["device"] == "c6-a"]
    assert health["passed_on_retry"] == 1
    page = (reports / "health.html").read_text()
    assert "passed on retry" in page

"""Fault injection for the robustness suite: a nightly killed at a stage, and what must hold afterwards."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.reaper import processes_in
from tests.conftest import REPO, alive, hilbench


def _children() -> dict[int, int]:
    """pid -> parent pid of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pid: int) -> set[int]:
    """Every process below `pid` right now."""
    parents = _children()
    found, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in found} - found
        found |= more
        grew = bool(more)
    return found - {pid}


@dataclass
class KilledNightly:
    """A nightly that got `sig` during `stage`, and every process it had started before."""

    returncode: int
    stderr: str
    frames_before: dict[str, int] = field(default_factory=dict)  # frame records stored when the signal went
    seen: set[int] = field(default_factory=set)
    state: Path = Path()
    results: Path = Path()


def stored_frames(results: Path) -> dict[str, int]:
    """Frame records per device in the store so far (read-only; empty before the store exists)."""
    if not results.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{results}?mode=ro", uri=True, timeout=1) as db:
            return dict(db.execute("SELECT device, COUNT(*) FROM frames GROUP BY device").fetchall())
    except sqlite3.Error:
        return {}


def kill_nightly_at(tmp: Path, stage: str, sig: signal.Signals, devices: list[str], session: Path,
                    fleet: Path, delay_s: float = 2.0) -> KilledNightly:  # fmt: skip
    """Run a nightly on `devices` of `fleet` with its own state folder, send `sig` `delay_s` after `stage` began (in
    the replay stage: once every device has frame records stored, so the test can check none is lost)."""
    state, results = tmp / "state", tmp / "results.sqlite"
    env = {**os.environ, "HILBENCH_STATE_DIR": str(state), "COLUMNS": "200"}
    argv = hilbench("nightly", "--fleet", str(fleet), *(a for d in devices for a in ("--device", d)), "--session",
                    str(session), "--reports", str(tmp / "reports"), "--results", str(results))  # fmt: skip
    err_path = tmp / "stderr.txt"
    with err_path.open("w") as err:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
    seen: set[int] = set()
    frames_before: dict[str, int] = {}
    fired_at = None
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        seen |= descendants(proc.pid)
        seen |= set(processes_in(state)) if state.exists() else set()
        if fired_at is None and f"stage {stage} on" in err_path.read_text():
            fired_at = time.monotonic() + delay_s
        ready = stage != "replay" or all(stored_frames(results).get(d, 0) > 0 for d in devices)
        if fired_at is not None and time.monotonic() >= fired_at and ready:
            frames_before = stored_frames(results)
            proc.send_signal(sig)
            break
        time.sleep(0.1)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert fired_at is not None, f"the nightly never reached stage {stage}: {err_path.read_text()[-2000:]}"
    return KilledNightly(proc.returncode, err_path.read_text(), frames_before, seen, state, results)


def leftovers(killed: KilledNightly, settle_s: float = 10.0) -> list[str]:
    """`ps` lines of processes the nightly started that still run (after up to `settle_s` for the kernel
    and the reapers to finish them), and of any process still running inside its virtual boards."""
    deadline = time.monotonic() + settle_s
    while True:
        left = {p for p in killed.seen if alive(p)} | set(processes_in(killed.state))
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    marker = str(killed.state)
    return [line for line in ps if int(line.split()[0]) in left or marker in line]

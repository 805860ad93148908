"""Leases: exclusive across processes, freed when the holder dies or its TTL passes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.core.errors import LeaseBusy
from bench.core.leases import LeaseSet, list_leases
from tests.conftest import REPO, hilbench

HOLDER = """
import sys, time
from pathlib import Path
from bench.core.leases import LeaseSet
leases = LeaseSet(holder="job-42", ttl_s=float(sys.argv[2]), folder=Path(sys.argv[1]))
leases.acquire("c6-a")
print("held", flush=True)
time.sleep(120)
"""


def start_holder(folder: Path, ttl_s: float = 30.0) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), str(ttl_s)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_lease_is_exclusive_across_processes_and_freed_when_holder_is_killed(tmp_path: Path) -> None:
    holder = start_holder(tmp_path)
    try:
        mine = LeaseSet(holder="me", folder=tmp_path)
        with pytest.raises(LeaseBusy, match="busy: held by job-42"):
            mine.acquire("c6-a", wait_s=0.5)
        mine.acquire("c6-b")  # other devices stay free
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        info = mine.acquire("c6-a")
        assert info.holder == "me" and info.pid == os.getpid()
        mine.release_all()
        assert list_leases(tmp_path) == []
    finally:
        holder.kill()


def test_lease_of_a_remote_holder_expires_after_its_ttl(tmp_path: Path) -> None:
    now = time.time()
    stale = {
        "device": "pi5-1",
        "holder": "nightly",
        "host": "some-other-bench-host",
        "pid": 1,
        "pid_start": 0.0,
        "taken": now - 10,
        "expires": now + 0.5,
    }
    (tmp_path / "pi5-1.lease").write_text(json.dumps(stale))
    mine = LeaseSet(holder="me", folder=tmp_path)
    with pytest.raises(LeaseBusy, match="nightly"):
        mine.acquire("pi5-1")
    time.sleep(0.6)
    assert mine.acquire("pi5-1").holder == "me"
    mine.release_all()


def test_holder_renews_its_lease(tmp_path: Path) -> None:
    mine = LeaseSet(holder="me", ttl_s=0.6, folder=tmp_path)
    first = mine.acquire("c6-a").expires
    time.sleep(0.5)
    (lease,) = list_leases(tmp_path)
    assert lease.expires > first and lease.alive
    mine.release_all()


def test_fleet_leases_command_shows_holder(tmp_path: Path) -> None:
    holder = start_holder(tmp_path)
    try:
        env = {**os.environ, "HILBENCH_LEASE_DIR": str(tmp_path)}
        proc = subprocess.run(hilbench("fleet", "leases", "--json"), cwd=REPO, capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        (row,) = json.loads(proc.stdout)["leases"]
        assert row["device"] == "c6-a" and row["holder"] == "job-42" and row["alive"] is True
    finally:
        holder.kill()

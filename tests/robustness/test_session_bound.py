"""Sessions within their bound: `hilbench session info` on 100,000 events of ~3.9 KB (the protocol line's most)
peaks under the documented bound scaled to that count (1 GiB at MAX_MESSAGES: 102 MiB), because the file is read
in one streaming pass (chunk by chunk) and each payload is checked and dropped; on main it held every chunk
inflated and every payload decoded (451 MiB here, 1.7 GiB with events of numbers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.replay.recording import MAX_MESSAGES, Session, SessionMessage, write_session
from tests.conftest import REPO, hilbench

BOUND_MIB = 1024  # docs/robustness.md "Session size": a session at MAX_MESSAGES within 1 GiB
EVENTS = 100_000
PEAK = """
import resource, subprocess, sys
run = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
sys.stdout.write(run.stdout)
"""


def test_session_info_on_100000_large_events_stays_within_the_scaled_bound(tmp_path: Path) -> None:
    event = {"session_id": "s", "timestamp_ms": 1, "action": "attack", "target_id": "npc-1",
             "context": {"hp_ratio": 0.5, "aggro_level": 0.1, "note": "x" * 3700}}  # fmt: skip
    path = tmp_path / "big.mcap"
    messages = [SessionMessage(k * 1_000_000, "event", event) for k in range(EVENTS)]  # one dict, shared
    write_session(path, Session("big", "combat", messages))
    argv = hilbench("session", "info", str(path), "--json")
    run = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, cwd=REPO, timeout=600)
    code, peak_mib = map(int, run.stdout.splitlines()[0].split())
    info = json.loads("\n".join(run.stdout.splitlines()[1:]))
    assert code == 0 and info["messages"] == EVENTS, run.stdout[-500:] + run.stderr[-500:]
    assert peak_mib < BOUND_MIB * EVENTS / MAX_MESSAGES, peak_mib

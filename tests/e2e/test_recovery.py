"""End to end: the recovery ladder on the virtual fleet. A virtual ESP32-C6 (real esptool/mpremote paths)
hangs in the middle of a replay; the ladder brings it back and the run carries on. A board that stays hung
is marked bad with the reason; `fleet health --fix` brings it back once it answers."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.recovery.fleet_health import check_one
from bench.replay.agents import deploy, fleet_opener
from bench.replay.recording import write_session
from bench.replay.service import replay_fleet
from bench.replay.synth import synth_session
from bench.store.health import BAD
from bench.store.results import open_store
from bench.virtual import virtual_fleet
from tests.conftest import hilbench

pytestmark = pytest.mark.e2e

UHUBCTL = Path(__file__).resolve().parents[2] / "bench" / "virtual" / "host_tools" / "uhubctl"


def fleet_file(tmp_path: Path, name: str = "c6-r", mac: str = "60:55:f9:c6:30:01") -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(
        f"""
[[device]]
name = "{name}"
kind = "esp32c6"
virtual = true
mac = "{mac}"
stall_s = 2.0
# on its counted clock it plays as much of the session as fits 40 s of the bench's time: on a busy host the
# session's own length, less the hang and the ladder, left the recovered board too little of its clock to play on
replay_budget_s = 40
power = {{ driver = "uhubctl", location = "3-1", port = 2, uhubctl = "{UHUBCTL}", off_s = 0.5 }}
"""
    )
    return path


async def _hang_after(running, name: str, op: str, results: Path, frames: int) -> None:
    """Make the board hang once `frames` of its frame records are in the store (not at a wall-clock time:
    how long opening the agent takes varies with the machine's load)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(results)) as db:
            if db.execute("SELECT COUNT(*) FROM frames WHERE device = ?", (name,)).fetchone()[0] >= frames:
                break
    else:
        raise AssertionError(f"{name}: fewer than {frames} frame records after 120 s")
    await running[name].control(op)


def test_a_board_hung_mid_replay_is_recovered_and_the_run_goes_on(tmp_path: Path) -> None:
    fleet = load_fleet(fleet_file(tmp_path))
    session = tmp_path / "s.mcap"
    write_session(session, synth_session("combat", 5, duration_s=10.0))
    store = open_store(tmp_path / "r.sqlite")

    async def scenario():
        async with virtual_fleet(list(fleet.devices)) as (devices, running):
            await deploy(devices[0])
            hang = asyncio.create_task(_hang_after(running, "c6-r", "hang", tmp_path / "r.sqlite", 40))
            result = await replay_fleet(
                devices, session, store, make_opener=lambda run_id: fleet_opener(store, run_id, tmp_path / "logs")
            )
            await hang
            return result

    result = asyncio.run(scenario())
    run = result.devices[0]
    assert run.status == "ok", run.detail
    info = store.runs.devices(result.run_id)[0].info
    (recovery,) = info["recoveries"]
    assert recovery["recovered"] and recovery["step"] == "hard_reset", recovery
    assert recovery["why"].startswith("frame loop stalled")
    tried = [s["step"] for s in recovery["steps"]]
    assert tried == ["restart_agent", "soft_reset", "hard_reset"]  # in order of cost, stopping when it answered
    frames = list(store.frames.frames(result.run_id, "c6-r"))
    indices = [f.i for f in frames]
    assert indices == sorted(set(indices)), "frame indices keep counting across the recovery"
    # frames before the hang (40 at 20 FPS) and after the recovery (the rest of the session) are stored,
    # with the hang and the ladder as the one long gap between them
    gaps = [(b.rx_ns - a.rx_ns, n + 1) for n, (a, b) in enumerate(itertools.pairwise(frames))]
    gap_ns, split = max(gaps)
    before, after = frames[:split], frames[split:]
    assert gap_ns >= 2e9 + recovery["seconds"] * 1e9 * 0.9, gap_ns
    assert len(before) >= 40 and len(after) >= 40, (len(before), len(after))
    history = store.health.events("c6-r")
    assert [e["event"] for e in history] == ["failure", "recovered"]
    assert history[1]["step"] == "hard_reset" and history[1]["seconds"] > 0
    assert not store.health.current("c6-r").bad
    store.close()


@pytest.mark.slow  # opt-in (--run-slow): 70 s of a full failing ladder; the hung-board recovery above runs by default
def test_a_board_that_never_recovers_is_marked_bad_and_fleet_health_fix_brings_it_back(tmp_path: Path) -> None:
    path = fleet_file(tmp_path, "c6-s", "60:55:f9:c6:30:02")
    fleet = load_fleet(path)
    results = tmp_path / "r.sqlite"
    store = open_store(results)
    session = tmp_path / "s.mcap"
    write_session(session, synth_session("combat", 6, duration_s=6.0))

    def nightly() -> subprocess.CompletedProcess:
        stages = [a for s in ("flash", "replay", "update", "faults") for a in ("--skip", s)]
        argv = hilbench("nightly", "--fleet", str(path), "--results", str(results), "--reports",
                        str(tmp_path / "reports"), "--session", str(session), *stages, "--json")  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    async def scenario():
        async with virtual_fleet(list(fleet.devices)) as (devices, running):
            await deploy(devices[0])
            hang = asyncio.create_task(_hang_after(running, "c6-s", "hang_stuck", results, 20))
            result = await replay_fleet(
                devices, session, store, make_opener=lambda run_id: fleet_opener(store, run_id, tmp_path / "logs")
            )
            await hang
            unfixed = await check_one(devices[0], store, fix=False)
            proc = await asyncio.to_thread(nightly)  # the next nightly, while the board is still dead
            await running["c6-s"].control("repair")  # a technician clears the fault; the board stays hung until reset
            fixed = await check_one(devices[0], store, fix=True)
            return result, unfixed, proc, fixed

    result, unfixed, proc, fixed = asyncio.run(scenario())
    run = result.devices[0]
    assert run.status == "failed" and "no step of the recovery ladder brought it back" in run.detail
    frames = list(store.frames.frames(result.run_id, "c6-s"))
    assert len(frames) >= 20, "frames before the hang are kept"
    (recovery,) = store.runs.devices(result.run_id)[0].info["recoveries"]
    assert [s["step"] for s in recovery["steps"]] == ["restart_agent", "soft_reset", "hard_reset", "power_cycle",
                                                      "reflash"]  # fmt: skip
    assert not any(s["ok"] for s in recovery["steps"])
    # marked bad, with the reason; a health check without --fix leaves it bad
    assert unfixed.state == "bad" and not unfixed.answered
    # the next nightly skips it and says why, in its summary and the health page
    assert proc.returncode == 3, proc.stderr
    summary = json.loads(proc.stdout)
    assert "c6-s" in summary["skipped"] and "no step of the recovery ladder" in summary["skipped"]["c6-s"]
    (row,) = summary["health"]
    assert row["state"] == "bad" and row["failures"] == 1 and row["unrecovered"] == 1
    assert "c6-s" in Path(summary["health_page"]).read_text() and "bad" in Path(summary["health_page"]).read_text()
    # fleet health --fix: it answers again after a hard reset and is marked good
    check = fixed
    assert check.answered and check.state == "good" and check.recovery is not None
    assert check.recovery.step == "hard_reset"
    assert not store.health.current("c6-s").bad
    # the command: a board marked bad that answers is marked good again (its own board process, same flash)
    store.health.set_state("c6-s", BAD, "marked by hand")
    store.close()
    cli = subprocess.run(hilbench("fleet", "health", "--fleet", str(path), "--results", str(results), "--json"),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert cli.returncode == 0, cli.stdout + cli.stderr
    (row,) = json.loads(cli.stdout)["devices"]
    assert (row["before"], row["state"], row["answered"]) == ("bad", "good", True)
    assert row["history"]["failures"] == 2 and row["history"]["recovered_by"] == {"hard_reset": 1}  # run, check

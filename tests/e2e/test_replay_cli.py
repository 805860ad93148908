"""`hilbench replay` end to end through the real CLI, drivers and virtual devices: the bundled virtual
fleet's Pi 5 (sshd + the host/ agent deployed over SSH) and ESP32-C6 (the MicroPython agent deployed with
esptool/mpremote, on its RFC 2217 serial port), plus the command's usage errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.replay.recording import write_session
from bench.replay.synth import synth_session
from bench.store.results import open_store
from tests.conftest import REPO, hilbench
from tests.linux_support import loopback_fleet


def _env() -> dict[str, str]:
    """The environment as the session fixtures left it (own lease and state folders), wide console."""
    return {**os.environ, "COLUMNS": "200"}


@pytest.mark.e2e
def test_replay_a_session_into_the_virtual_pi5(tmp_path: Path) -> None:
    session = tmp_path / "dialogue.mcap"
    write_session(session, synth_session("dialogue", 21, duration_s=3.0))
    store_path = tmp_path / "results.sqlite"
    run = subprocess.run(
        hilbench("replay", "--fleet", str(loopback_fleet(tmp_path / "fleet.toml", ("pi5",))), "--device", "pi5-1",
                 "--session", str(session), "--results", str(store_path), "--deploy", "--json"),
        cwd=REPO, capture_output=True, text=True, timeout=600, env=_env(),
    )  # fmt: skip
    assert run.returncode == ExitCode.OK, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    assert doc["status"] == "ok" and doc["session"] == "dialogue-0021"
    (dev,) = doc["devices"]
    assert dev["name"] == "pi5-1" and dev["voice_mode"] == "voice" and dev["inputs_sent"] == doc["inputs"]
    ms = dev["measurements"]
    assert ms["fps"]["unit"] == "FPS" and ms["fps"]["value"] > 10
    assert ms["decision_latency_p50"]["unit"] == "us" and 0 < ms["decision_latency_p50"]["value"] < 200_000
    with open_store(store_path) as store:
        (row,) = store.runs.latest()
        assert row.id == doc["run_id"] and row.status == "ok"
        assert store.frames.frame_count(row.id, "pi5-1") == dev["frames"] > 50
        assert store.runs.devices(row.id)[0].info["agent"]["agent"] == "npc-host"
        # Linux boards are opened with their telemetry monitor: board samples are stored with the run
        samples = store.db.execute("SELECT COUNT(*) FROM telemetry WHERE run_id = ? AND device = 'pi5-1'", (row.id,))
        assert samples.fetchone()[0] > 0


@pytest.mark.e2e
@pytest.mark.slow  # opt-in (--run-slow): the nightly e2e replays voice features into c6-b by default
def test_replay_into_the_virtual_esp32c6_sends_voice_features(tmp_path: Path) -> None:
    session = tmp_path / "combat.mcap"
    write_session(session, synth_session("combat", 22, duration_s=3.0))
    run = subprocess.run(
        hilbench("replay", "--device", "c6-a", "--session", str(session), "--results", str(tmp_path / "r.sqlite"),
                 "--deploy", "--json"),
        cwd=REPO, capture_output=True, text=True, timeout=600, env=_env(),
    )  # fmt: skip
    assert run.returncode == ExitCode.OK, run.stderr[-3000:]
    (dev,) = json.loads(run.stdout)["devices"]
    # 921600 baud cannot carry PCM with the other channels: the board gets per-10 ms features, and says so
    assert dev["voice_mode"] == "voicef" and "921600" not in dev["voice_reason"] and "B/s" in dev["voice_reason"]
    ms = dev["measurements"]
    assert ms["fps"]["value"] == pytest.approx(20, rel=0.15)  # the esp32c6 kind's 20 Hz display
    assert ms["inputs_sent"]["value"] == json.loads(run.stdout)["inputs"]
    assert 0 < ms["decision_latency_p50"]["value"] < 200_000 and ms["mem_peak"]["value"] > 0


def test_usage_errors_exit_2_and_name_the_problem(tmp_path: Path) -> None:
    def replay(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(hilbench("replay", *args), cwd=REPO, capture_output=True, text=True, env=_env())

    missing = replay("--session", str(tmp_path / "none.mcap"), "--results", str(tmp_path / "r.sqlite"))
    assert missing.returncode == ExitCode.USAGE and "none.mcap does not exist" in missing.stderr
    fixture = str(REPO / "fixtures" / "sessions" / "combat.mcap")
    bad_speed = replay("--session", fixture, "--speed", "fast")
    assert bad_speed.returncode == ExitCode.USAGE and "--speed 'fast': not a number" in bad_speed.stderr
    assert "Traceback" not in missing.stderr + bad_speed.stderr

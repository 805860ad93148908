"""Session files: round trip, named errors for malformed files, fixture hashes and generator determinism."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.replay.channels import CHANNELS, VOICE_CHUNK_SAMPLES
from bench.replay.info import session_info
from bench.replay.recording import (
    BadSessionMessage,
    NotASession,
    Session,
    SessionMessage,
    SessionNotFound,
    SessionTruncated,
    read_session,
    write_session,
)
from bench.replay.synth import SCENARIOS, synth_session, write_fixtures

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "sessions"


def _event(ts_ms: int, action: str) -> dict:
    return {
        "session_id": "s1",
        "timestamp_ms": ts_ms,
        "action": action,
        "target_id": "npc-1",
        "context": {"hp_ratio": 0.5, "aggro_level": 0.25},
    }


def _small_session() -> Session:
    voice = bytes(range(256)) + bytes(2 * VOICE_CHUNK_SAMPLES - 256)
    msgs = [
        SessionMessage(1_000_000_000, "voice", voice),
        SessionMessage(1_002_000_000, "gaze", (0.25, 0.5, 0.875)),
        SessionMessage(1_005_000_000, "mocap", tuple(float(i) / 8 for i in range(51))),
        SessionMessage(1_006_000_000, "action", _event(1006, "attack")),
        SessionMessage(1_007_000_000, "event", _event(1007, "damage_taken")),
    ]
    return Session("s1", "unit", msgs, {"note": "x"})


def test_round_trip_keeps_timestamps_channels_and_values(tmp_path: Path) -> None:
    original = _small_session()
    path = tmp_path / "s.mcap"
    write_session(path, original)
    back = read_session(path)
    assert back.session_id == "s1" and back.scenario == "unit" and back.meta["note"] == "x"
    assert [(m.ts_ns, m.channel) for m in back.messages] == [(m.ts_ns, m.channel) for m in original.messages]
    assert back.messages[0].value == original.messages[0].value
    assert back.messages[1].value == (0.25, 0.5, 0.875)
    assert back.messages[2].value == original.messages[2].value
    assert back.messages[3].value == original.messages[3].value


def test_missing_file_and_non_mcap_get_named_errors(tmp_path: Path) -> None:
    with pytest.raises(SessionNotFound, match="does not exist"):
        read_session(tmp_path / "nope.mcap")
    junk = tmp_path / "junk.mcap"
    junk.write_text("hello, not mcap\n")
    with pytest.raises(NotASession, match=r"junk\.mcap: not an MCAP file"):
        read_session(junk)


def test_truncated_file_gets_named_error(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    write_session(path, synth_session("combat", 1, duration_s=2.0))
    data = path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionTruncated, match="ends early"):
        read_session(cut)


def test_foreign_mcap_and_bad_payload_get_named_errors(tmp_path: Path) -> None:
    from mcap.writer import Writer

    foreign = tmp_path / "foreign.mcap"
    with foreign.open("wb") as fh:
        w = Writer(fh)
        w.start(profile="ros2", library="x")
        w.finish()
    with pytest.raises(NotASession, match="profile is 'ros2'"):
        read_session(foreign)

    bad = tmp_path / "bad.mcap"
    with bad.open("wb") as fh:
        w = Writer(fh)
        w.start(profile="npc-session", library="x")
        ch = w.register_channel("/gaze", "f32le", 0)
        w.add_message(ch, log_time=5, data=b"\x00" * 8, publish_time=5)  # 2 floats, gaze needs 3
        w.add_metadata("session", {"id": "b", "scenario": "", "format_version": "1"})
        w.finish()
    with pytest.raises(BadSessionMessage, match=r"gaze message #0 at 5 ns: .*8 bytes, expected 12"):
        read_session(bad)


def test_fixture_files_match_their_recorded_hashes() -> None:
    sums = dict(line.split()[::-1] for line in (FIXTURES / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {f"{name}.mcap" for name in SCENARIOS}
    for name, digest in sums.items():
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest, name


def test_generator_reproduces_the_fixtures_byte_for_byte(tmp_path: Path) -> None:
    for path in write_fixtures(tmp_path):
        assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), path.name
    assert synth_session("combat", seed=1, duration_s=3).messages != synth_session("combat", 2, 3).messages


def test_fixture_sessions_are_plausible() -> None:
    for name in SCENARIOS:
        info = session_info(read_session(FIXTURES / f"{name}.mcap"))
        assert 29.9 <= info.duration_s <= 60
        rates = {c.name: c for c in info.channels}
        assert set(rates) == set(CHANNELS)
        assert rates["voice"].measured_hz == pytest.approx(100, abs=0.1)
        assert rates["mocap"].measured_hz == pytest.approx(90, abs=0.1)
        assert rates["action"].messages >= 10 and rates["event"].messages >= 5
    exploration = {c.name: c for c in session_info(read_session(FIXTURES / "exploration.mcap")).channels}
    assert len(exploration["gaze"].gaps) == 2 and all(g.length_ms >= 190 for g in exploration["gaze"].gaps)


def test_info_cli_json_and_error_exit_code(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "session", "info", str(FIXTURES / "combat.mcap"), "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    data = json.loads(run.stdout)
    assert data["scenario"] == "combat" and data["duration_s"] == pytest.approx(30, abs=0.1)
    assert [c["name"] for c in data["channels"]] == list(CHANNELS)
    junk = tmp_path / "x.mcap"
    junk.write_bytes(b"nope")
    env = {**os.environ, "COLUMNS": "300"}
    cmd = [sys.executable, "-m", "bench", "session", "info", str(junk)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, env=env)
    assert run.returncode == 2 and b"not an MCAP file" in run.stderr and b"Traceback" not in run.stderr


def test_synth_cli_writes_what_the_generator_makes(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench", "session", "synth", "--scenario", "dialogue", "--seed", "5",
           "--duration", "2", "--out", str(tmp_path), "--json"]  # fmt: skip
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
    (written,) = json.loads(run.stdout)["sessions"]
    path = Path(written["path"])
    assert path == tmp_path / "dialogue-5.mcap" and written["bytes"] == path.stat().st_size
    expected = tmp_path / "expected.mcap"
    write_session(expected, synth_session("dialogue", 5, duration_s=2))
    assert path.read_bytes() == expected.read_bytes()

"""Hostile and damaged sessions: a giant or control-character session id, NaN and infinity where the agents
need finite numbers, corrupt bytes named for what they are, and a replay that fails (exit 1, named) when an
agent refuses the lines the bench sends it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bench.agent import wire
from bench.agent.endpoint import AgentEndpoint
from bench.config.fleet import Device
from bench.core.errors import ExitCode
from bench.core.outcomes import FailureClass
from bench.replay import channels
from bench.replay.plan import build_plan
from bench.replay.recording import Session, SessionMessage, write_session
from bench.replay.run import ReplayRun
from bench.replay.synth import synth_session
from bench.store.results import open_store
from tests.conformance.harness import HostAgent
from tests.conftest import REPO, hilbench


def _event(ts_ms: int, **context: object) -> dict:
    return {"session_id": "s", "timestamp_ms": ts_ms, "action": "attack", "target_id": None,
            "context": {"hp_ratio": 0.5, "aggro_level": 0.1, **context}}  # fmt: skip


def _write_unchecked(path: Path, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write `session` as a recorder without the bench's checks would (NaN floats, odd ids)."""
    with monkeypatch.context() as m:
        m.setattr(channels, "_check_finite", lambda values: values)
        m.setattr(channels, "check_event", lambda value: None)
        write_session(path, session)


def _info(path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hilbench("session", "info", str(path)), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _gaze(*values: float) -> list[SessionMessage]:
    return [SessionMessage(k * 8_333_333, "gaze", (0.5, 0.5, 1.0)) for k in range(5)] + [
        SessionMessage(5 * 8_333_333, "gaze", values)
    ]


def test_giant_session_id_is_refused_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 KB session id: `session info` answers (exit 2 naming the limit) instead of hanging in the
    terminal highlighter."""
    path = tmp_path / "giant.mcap"
    _write_unchecked(path, Session("x" * 200_000, "combat", _gaze(0.1, 0.2, 0.3)), monkeypatch)
    started = time.monotonic()
    run = _info(path, timeout=60)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "session id is 200000 characters, over the 200-character limit" in run.stderr
    assert time.monotonic() - started < 30


def test_session_id_with_terminal_escapes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session id carrying a terminal escape sequence never reaches the terminal."""
    path = tmp_path / "esc.mcap"
    _write_unchecked(path, Session("s\x1b]0;owned\x07", "combat", _gaze(0.1, 0.2, 0.3)), monkeypatch)
    run = _info(path)
    assert run.returncode == ExitCode.USAGE and "control characters" in run.stderr
    assert "\x1b" not in run.stdout + run.stderr


@pytest.mark.parametrize(
    "values",
    [(float("nan"), 0.5, 0.0), (0.5, float("inf"), 1.0), (0.5, 0.5, float("-inf"))],
    ids=["nan", "inf", "-inf"],
)
def test_non_finite_floats_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: tuple) -> None:
    """An eye-tracker dropout recorded as NaN or infinity: refused naming the channel, message and value (the
    agents would get invalid JSON)."""
    path = tmp_path / "nan.mcap"
    _write_unchecked(path, Session("s", "combat", _gaze(*values)), monkeypatch)
    run = _info(path)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "gaze message #5" in run.stderr and "NaN and infinity are not replayed" in run.stderr


@pytest.mark.parametrize(
    "payload",
    [b'"hp_ratio": NaN', b'"hp_ratio": Infinity', b'"hp_ratio": 1e400', b'"hp_ratio": 0.5, "extra": [-Infinity]'],
    ids=["NaN", "Infinity", "1e400", "nested -Infinity"],
)
def test_non_finite_event_numbers_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, payload: bytes) -> None:
    """NaN, Infinity and numbers beyond a double in an action's JSON (anywhere in it) are refused by name."""
    path = tmp_path / "event.mcap"
    text = json.dumps(_event(0)).encode().replace(b'"hp_ratio": 0.5', payload)
    spec = channels.CHANNELS["action"]
    with monkeypatch.context() as m:
        m.setattr(channels.ChannelSpec, "encode", lambda self, value: text if self is spec else b"")
        write_session(path, Session("s", "combat", [SessionMessage(0, "action", None)]))
    run = _info(path)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "action message #0" in run.stderr and "Traceback" not in run.stderr


def test_events_with_non_finite_numbers_are_not_written(tmp_path: Path) -> None:
    """The writer refuses them too (`session synth`, a recorder built on the bench)."""
    with pytest.raises(channels.PayloadError, match="NaN and infinity"):
        write_session(tmp_path / "w.mcap", Session("s", "combat", _gaze(float("nan"), 0.0, 0.0)))
    assert not (tmp_path / "w.mcap").exists()


def _fixture_bytes() -> bytes:
    return (REPO / "fixtures" / "sessions" / "combat.mcap").read_bytes()


def _flip_a_middle_byte(data: bytearray) -> None:
    data[len(data) // 2] ^= 0xFF  # inside a chunk: a CRC mismatch


def _header_length_past_the_end(data: bytearray) -> None:
    data[9:17] = (1 << 40).to_bytes(8, "little")  # the header record's length


@pytest.mark.parametrize(
    ("damage", "not_said"),
    [(_flip_a_middle_byte, "stopped mid-write"), (_header_length_past_the_end, "64 MiB")],
    ids=["flipped byte", "record length beyond the file"],
)
def test_a_damaged_file_says_corrupt(tmp_path: Path, damage, not_said: str) -> None:
    """A byte changed inside a chunk, or a record whose length field claims more than the file holds: the
    message says the file is corrupt, not that the recorder stopped or that a record is over 64 MiB (no such
    record exists)."""
    data = bytearray(_fixture_bytes())
    damage(data)
    path = tmp_path / "damaged.mcap"
    path.write_bytes(bytes(data))
    run = _info(path)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert "corrupt" in run.stderr and not_said not in run.stderr


def test_cut_file_says_cut_short(tmp_path: Path) -> None:
    """A file cut in the middle: the message says it ends early."""
    path = tmp_path / "cut.mcap"
    path.write_bytes(_fixture_bytes()[: len(_fixture_bytes()) // 2])
    run = _info(path)
    assert run.returncode == ExitCode.USAGE and "ends early" in run.stderr, run.stderr


def test_replay_fails_when_the_agent_refuses_inputs(tmp_path: Path) -> None:
    """An agent that answers the bench's inputs with `bad_json` (here: a NaN as a bench without the checks
    would print it, not JSON) makes the device's replay a product failure naming the refusals, never "ok"."""
    agent = HostAgent(tmp_path / "agent")
    plan = build_plan(synth_session("combat", 3, duration_s=1.0), wire.encode)
    bad = next(p for p in plan.inputs if p.channel == "gaze")
    body = json.dumps({"t": "in", "seq": bad.seq, "ts": 0, "ch": "gaze", "d": [float("nan"), 0.5, 1.0]})
    body = body.replace("NaN", "nan").encode()
    line = wire.START + body + wire.SEP + wire.crc32hex(body) + b"\n"
    for mode in bad.lines:
        bad.lines[mode] = line
    device = Device("h1", "pi5", None, virtual=True, settings={"fps_target": 30, "vsync_hz": 30})

    async def body(session) -> list:
        async def open_agent(dev: Device) -> AgentEndpoint:
            async def close() -> None:
                return None

            return AgentEndpoint(session, close)

        with open_store(tmp_path / "r.sqlite") as store:
            run_id = store.runs.begin_run("replay", session=plan.session_id, speed=1.0)
            return await ReplayRun(plan, [device], open_agent, store, run_id, speed=1.0).execute()

    (run,) = agent.run(body)
    assert run.status == "failed" and run.failure == FailureClass.PRODUCT, run.detail
    assert "refused 1 input line(s), first bad_json" in run.detail


def test_more_messages_than_the_limit_are_refused_while_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session over the message limit is refused by name as soon as the limit is passed (here the limit is
    lowered to 10; the real one's memory is measured by tests/bench/bench_session_memory.py)."""
    from bench.replay import recording as session_module

    path = tmp_path / "many.mcap"
    write_session(path, Session("s", "combat", [SessionMessage(k * 1_000_000, "gaze", (0.1, 0.2, 0.3))
                                                for k in range(20)]))  # fmt: skip
    monkeypatch.setattr(session_module, "MAX_MESSAGES", 10)
    with pytest.raises(session_module.BadSessionMessage, match="more than 10 messages"):
        session_module.read_session(path)


def test_agent_text_in_the_replay_output_is_not_markup() -> None:
    """A device's failure detail holding `[/yellow]` and `[bold]` (an agent's own words) is printed as written:
    as markup, rich would raise on the stray closing tag and `hilbench replay` would stop with a traceback."""
    from rich.console import Console

    from bench.commands.replay import device_notes
    from bench.replay.run import DeviceRun

    run = DeviceRun(Device("c6-a", "esp32c6", None, virtual=True))
    run.fail("the agent refused 1 input line(s), first bad_json: [/yellow] [bold]x", FailureClass.PRODUCT)
    console = Console(record=True, width=300)
    for line in device_notes([run]):
        console.print(line, highlight=False)
    assert "first bad_json: [/yellow] [bold]x" in console.export_text()

"""End to end: a recorded session replayed into real reference agents, measured and stored.

host/ is deployed from its bundle into a temp folder and started as a local process serving the
protocol over TCP; the MicroPython agent runs in the unix VM over stdin/stdout (when it is on this
branch). Two host agents take the replay at once, one of them behind a (declared) 115200-baud link so
that it gets voice features instead of PCM."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from bench.agent.endpoint import AgentEndpoint
from bench.agent.session import AgentSession
from bench.agent.transport import StreamTransport
from bench.config.fleet import Device, SerialLink
from bench.replay.recording import write_session
from bench.replay.service import replay_fleet
from bench.replay.synth import synth_session
from bench.store.results import open_store
from tests.host_agent_support import HostAgentProcess

pytestmark = pytest.mark.e2e


def _host_device(name: str, link=None) -> Device:
    return Device(
        name, "pi5", link,
        settings={"model": "npc-policy-int8", "memory_limit_mb": 256, "fps_target": 30, "vsync_hz": 60,
                  "decision_budget_ms": 50},
    )  # fmt: skip


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "combat.mcap"
    write_session(path, synth_session("combat", 11, duration_s=4.0))
    return path


def test_replay_into_two_host_agents_over_tcp(tmp_path: Path, session_file: Path) -> None:
    devices = [_host_device("host-a"), _host_device("host-uart", SerialLink("socket://127.0.0.1:1", 115200))]
    agents = {d.name: HostAgentProcess(d, tmp_path / d.name) for d in devices}
    sessions: dict[str, AgentSession] = {}

    async def open_agent(device: Device) -> AgentEndpoint:
        transport = await StreamTransport.connect("127.0.0.1", agents[device.name].port)
        session = await AgentSession.open(transport, device=device.name, log_path=tmp_path / f"{device.name}.log")
        sessions[device.name] = session

        async def close() -> None:
            with contextlib.suppress(Exception):
                await session.shutdown(timeout=5)
            await session.close()

        return AgentEndpoint(session, close)

    store = open_store(tmp_path / "results.sqlite")
    try:
        result = asyncio.run(replay_fleet(devices, session_file, store, open_agent, speed=1.0, bench="e2e"))
    finally:
        for a in agents.values():
            a.stop()

    assert [r.status for r in result.devices] == ["ok", "ok"], [r.detail for r in result.devices]
    run = store.runs.run(result.run_id)
    assert run.status == "ok" and run.session == "combat-0011"
    rows = {d.name: d for d in store.runs.devices(result.run_id)}
    assert rows["host-a"].info["voice_mode"] == "voice" and rows["host-uart"].info["voice_mode"] == "voicef"
    assert rows["host-a"].info["agent"]["agent"] == "npc-host"
    for name in ("host-a", "host-uart"):
        m = {x.name: x for x in store.measures.measurements(result.run_id, name)}
        frames = list(store.frames.frames(result.run_id, name))
        # about 4 s of display frames at 60 Hz, every other one a key frame with an inference: the 30 FPS target
        assert m["frames"].value == len(frames) >= 200
        assert m["fps"].value == pytest.approx(30, rel=0.1)
        assert m["inferences"].value == len([f for f in frames if f.ran])
        assert 0 < m["inference_latency_p50"].value < 50_000
        # every input was sent and decided; the agent's decisions used them in order
        assert len(store.frames.inputs(result.run_id, name)) == result.inputs
        seqs = [f.seq for f in frames if f.ran]
        assert seqs == sorted(seqs) and seqs[-1] >= result.inputs - 20
        assert m["inputs_undecided"].value <= 20
        # input -> decision through a real agent: within a few frame periods, clock-offset corrected
        assert 0 < m["decision_latency_p50"].value < 100_000
        assert m["decision_latency_p50"].samples > 600 and m["decision_latency_p99"].flags == ()
        assert m["first_frame"].value is not None and 0 < m["first_frame"].value < 1000
        assert m["replay_send_error_p50"].value < 1_000_000
        assert m["mem_peak"].value and m["mem_peak"].value > 1_000_000
        assert set(store.measures.histograms(result.run_id, name)) >= {"decision_latency", "inference_latency"}


def _micropython_board(folder: Path) -> list[str]:
    """Deploy the MicroPython agent's board bundle into `folder`; its argv."""
    from bench.bundles import micropython_bundle
    from bench.bundles.mpy_board import ESP32C6_HEAP, agent_command, copy_bundle
    from bench.config.fleet import load_fleet

    esp = next(d for d in load_fleet(None).devices if d.kind == "esp32c6")
    # a bare VM: no power meter is wired to it, so no inference marker (the unix port has no machine.Pin)
    device = Device("mpy-1", "esp32c6", None, settings=esp.settings.replace(marker_gpio=None))
    copy_bundle(micropython_bundle(device, folder / ".bundle"), folder)
    return agent_command(ESP32C6_HEAP)


def test_replay_into_the_micropython_agent(tmp_path: Path, session_file: Path) -> None:
    from bench.agent.transport import ProcessTransport
    from bench.config.fleet import load_fleet

    board = tmp_path / "board"
    argv = _micropython_board(board)
    esp = next(d for d in load_fleet(None).devices if d.kind == "esp32c6")
    # an ESP32-C6 on its UART: 921600 baud is too slow for PCM plus the other channels -> voice features
    device = Device("mpy-1", "esp32c6", SerialLink("socket://127.0.0.1:1", 921600),
                    settings=esp.settings.replace(marker_gpio=None))  # fmt: skip

    async def open_agent(dev: Device) -> AgentEndpoint:
        transport = await ProcessTransport.spawn(argv, cwd=board, stderr_path=board / "stderr.log")
        session = await AgentSession.open(transport, device=dev.name, log_path=tmp_path / "mpy.log", timeout=10)

        async def close() -> None:
            with contextlib.suppress(Exception):
                await session.shutdown(timeout=5)
            await session.close()
            await transport.close(grace=5)

        return AgentEndpoint(session, close)

    store = open_store(tmp_path / "results.sqlite")
    result = asyncio.run(replay_fleet([device], session_file, store, open_agent, speed=1.0, bench="e2e"))
    (run,) = result.devices
    assert run.status == "ok", run.detail
    (row,) = store.runs.devices(result.run_id)
    assert row.info["voice_mode"] == "voicef" and row.info["agent"]["agent"] != "npc-host"
    m = {x.name: x for x in store.measures.measurements(result.run_id, "mpy-1")}
    frames = list(store.frames.frames(result.run_id, "mpy-1"))
    assert m["frames"].value == len(frames) >= 40  # ~4.5 s at the kind's 20 Hz display
    assert m["inferences"].value > 0 and m["inference_latency_p50"].value > 0
    seqs = [f.seq for f in frames if f.ran]
    assert seqs == sorted(seqs) and seqs[-1] > result.inputs // 2
    assert 0 < m["decision_latency_p50"].value < 1_000_000
    # every input the device was to get was sent and stored: all of them, or each sampled channel at the
    # bundled C6's input_max_hz (events always)
    sent = int(m["inputs_sent"].value)
    assert m["mem_peak"].value and len(store.frames.inputs(result.run_id, "mpy-1")) == sent
    assert sent == result.inputs if not esp.settings.input_max_hz else 0 < sent < result.inputs


def test_an_agent_killed_mid_replay_fails_alone_and_keeps_its_frames(tmp_path: Path, session_file: Path) -> None:
    import threading

    devices = [_host_device("host-ok"), _host_device("host-dies")]
    agents = {d.name: HostAgentProcess(d, tmp_path / d.name) for d in devices}

    async def open_agent(device: Device) -> AgentEndpoint:
        transport = await StreamTransport.connect("127.0.0.1", agents[device.name].port)
        session = await AgentSession.open(transport, device=device.name)
        return AgentEndpoint(session, session.close)

    killer = threading.Timer(2.0, agents["host-dies"].proc.kill)  # about half-way through the 4 s session
    store = open_store(tmp_path / "results.sqlite")
    try:
        killer.start()
        result = asyncio.run(replay_fleet(devices, session_file, store, open_agent, speed=1.0))
    finally:
        killer.cancel()
        for a in agents.values():
            a.stop()
    by_name = {r.device.name: r for r in result.devices}
    assert by_name["host-ok"].status == "ok"
    dead = by_name["host-dies"]
    assert dead.status == "failed" and dead.detail
    assert store.runs.run(result.run_id).status == "failed"
    # what the dead agent sent before it died is stored and measured
    frames = store.frames.frame_count(result.run_id, "host-dies")
    assert 60 <= frames < store.frames.frame_count(result.run_id, "host-ok")
    m = {x.name: x.value for x in store.measures.measurements(result.run_id, "host-dies")}
    assert m["frames"] == frames and m["inferences"] > 0 and m["decision_latency_p50"] is not None
    assert 0 < len(store.frames.inputs(result.run_id, "host-dies")) < result.inputs

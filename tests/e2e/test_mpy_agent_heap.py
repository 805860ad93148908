"""A long-running MicroPython board (the real unix VM, 300 KB heap, like an ESP32-C6) keeps a heap that takes
an update: every fixture session replayed with the frame loop running, then 50 CoAP updates and 50 cold starts
in a row, and the next update still completes (issue 30: per-input allocations fragmented the heap until a
6.4 kB update failed with MemoryError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.agent import wire
from bench.core.loop_thread import LoopThread
from bench.models import model_file
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.replay.plan import VoiceMode, build_plan
from bench.replay.recording import read_session

from .mpy_agent_proc import MpyAgent, make_board, signed

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SESSIONS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "sessions").glob("*.mcap"))
ROUNDS = 50
MODELS = {1: "npc-policy-int8", 2: "npc-policy-int8-v2"}


def heap(agent: MpyAgent) -> dict[str, int]:
    s = agent.request({"t": "stats", "heap": True})
    return {k: s[k] for k in ("mem", "mem_peak", "mem_free", "mem_max_free")}


def replay(agent: MpyAgent, path: Path) -> int:
    """Every input of the session at once (the pipe paces it) with the frame loop running; the frame count."""
    plan = build_plan(read_session(path), wire.encode)
    assert agent.request({"t": "start", "fps": 20})["t"] == "ack"
    for item in plan.inputs:
        agent.send_raw(item.lines[VoiceMode.PCM])  # PCM: the agent computes the voice features itself
    stats = agent.request({"t": "stats"}, timeout=300)  # answered once every input before it was read
    agent.request({"t": "stop"}, timeout=30)
    stopped = agent.wait_for("stopped", timeout=30)
    assert stats["errors"] == {}, stats["errors"]
    return stopped["frames"]


def update(agent: MpyAgent, server: UpdateServer, store: ModelStore, version: int) -> dict:
    return agent.request(
        {
            "t": "update",
            "url": server.model_url("npc-policy", version),
            "manifest": store.manifest("npc-policy", version),
            "delta": False,
            "coap": {"ack_timeout_ms": 200},
            "allow_downgrade": True,  # the rounds alternate v2 and v1: every other one goes back a version
        },
        timeout=120,
    )


def test_a_board_after_every_session_50_updates_and_50_cold_starts_still_takes_an_update(tmp_path, capsys):
    board = make_board(tmp_path, tuple(MODELS.values()))
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    for version, name in MODELS.items():
        store.publish(model_file(name, "npcm"), key, name="npc-policy", fmt="npcm-int8", version=version)
    agent = MpyAgent(board)
    loop = LoopThread()
    server = UpdateServer(store)
    loop.run(server.start())
    try:
        agent.wait_for("hello")
        manifest = signed(board, MODELS[1], 1)
        assert agent.request({"t": "load", "path": f"models/{MODELS[1]}.npcm", "manifest": manifest})["t"] == "loaded"
        before = heap(agent)
        frames = [replay(agent, path) for path in SESSIONS]
        after_sessions = heap(agent)
        for k in range(ROUNDS):
            reply = update(agent, server, store, 2 - k % 2)
            assert reply["t"] == "updated", (k, reply)
        after_updates = heap(agent)
        for k in range(ROUNDS):
            version = 1 + k % 2
            cold = {"t": "load", "path": f"models/{MODELS[version]}.npcm", "cold": True, "allow_downgrade": True}
            reply = agent.request({**cold, "manifest": signed(board, MODELS[version], version)}, timeout=120)
            assert reply["t"] == "loaded", (k, reply)
        after_cold = heap(agent)
        reply = update(agent, server, store, 2)
        assert reply["t"] == "updated", reply
        assert reply["bytes"] == 6376 and reply["model"]["version"] == 2
        assert agent.request({"t": "infer", "x": [0.3] * 48})["model"] == 2
        last = heap(agent)
    finally:
        loop.run(server.stop())
        loop.close()
        code = agent.close()
    assert code == 0
    assert all(f > 0 for f in frames), frames
    with capsys.disabled():
        for label, h in (
            ("loaded", before),
            ("after the sessions", after_sessions),
            ("after 50 updates", after_updates),
            ("after 50 cold starts", after_cold),
            ("after the next update", last),
        ):
            print(f"\nheap {label}: {h}", end="")
        print()
    # the heap is steady: once the update code is in (the first update imports it), 50 cold starts and one more
    # update leave the largest free block where the 50 updates left it (within 20%), with room for two models
    # the size of the update (the agent streams one to flash anyway)
    assert last["mem_max_free"] >= 0.8 * after_updates["mem_max_free"], (after_updates, last)
    assert last["mem_max_free"] >= 2 * reply["bytes"], last  # 25-41 kB seen; the update is 6.4 kB
    assert last["mem_peak"] <= after_updates["mem_peak"] * 1.05, (after_updates, last)

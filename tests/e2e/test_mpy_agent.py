"""The MicroPython agent in the real MicroPython unix VM (300 KB heap, like an ESP32-C6), over pipes."""

import numpy as np
import pytest

from bench.agent import wire
from bench.models import model_file
from bench.models.policy import calibration_inputs
from bench.models.signing import generate_key
from bench.models.tflite_read import read_int8_policy
from bench.testkit import reference as R

from .mpy_agent_proc import MpyAgent, make_board, signed

pytestmark = pytest.mark.e2e


@pytest.fixture
def board(tmp_path):
    return make_board(
        tmp_path,
        (
            "npc-policy-int8",
            "npc-policy-int8-v2",
            "npc-fault-crash-int8",
            "npc-fault-oversize-int8",
            "npc-fault-broken-int8",
        ),
    )


@pytest.fixture
def agent(board):
    a = MpyAgent(board)
    yield a
    assert a.close() == 0


def load(agent, board, name, version, **kw):
    return agent.request({"t": "load", "path": f"models/{name}.npcm", "manifest": signed(board, name, version, **kw)})


def test_hello_ping_and_errors_never_kill_the_agent(agent):
    boot = agent.wait_for("hello")
    assert boot["proto"] == wire.PROTO and boot["agent"] == "npc-mpy" and boot["model"] is None
    assert "id" not in boot
    b0 = 123456789
    pongs = [agent.request({"t": "ping", "b0": b0}) for _ in range(3)]
    assert all(p["t"] == "pong" and p["b0"] == b0 for p in pongs)
    assert pongs[0]["d"] < pongs[1]["d"] < pongs[2]["d"]
    agent.send_raw(b'~{"t":"ping","id":77}*00000000\n')
    assert agent.wait_for("error")["code"] == "bad_frame"
    agent.send_raw(b"~" + b"{not json" + b"*" + wire.crc32hex(b"{not json") + b"\n")
    assert agent.wait_for("error")["code"] == "bad_json"
    assert agent.request({"t": "dance"}) == {
        "t": "error",
        "id": 2 + 3 - 1,
        "code": "unknown_type",
        "detail": "no message type 'dance'",
    }
    assert agent.request({"t": "start", "fps": 20})["code"] == "not_loaded"
    agent.send_raw(b"console noise from the bench\n")
    stats = agent.request({"t": "stats"})
    assert stats["errors"] == {"bad_frame": 1, "bad_json": 1, "unknown_type": 1, "not_loaded": 1}


@pytest.mark.parametrize("kernel", ["viper", "python"])
def test_load_then_infer_matches_the_reference(board, kernel):
    if kernel == "python":  # a port without the native emitter: npcnn falls back to its pure-Python loop
        (board / "npcnn_viper.py").unlink()
    agent = MpyAgent(board)
    try:
        assert agent.wait_for("hello")["runtime"].endswith(f"npcnn {kernel}")
        check_inference(agent, board)
    finally:
        assert agent.close() == 0


def check_inference(agent, board):
    reply = load(agent, board, "npc-policy-int8", 1)
    assert reply["t"] == "loaded", reply
    assert reply["model"]["version"] == 1 and reply["verify_us"] > 0 and reply["switch_us"] >= 0
    assert agent.request({"t": "hello"})["model"]["sha256"] == signed(board, "npc-policy-int8", 1)["sha256"]
    p = read_int8_policy(model_file("npc-policy-int8"))
    x = calibration_inputs(48, 10, "agent-infer")
    ref = R.int8_infer(p.mlp, R.quantize_input(x, p.mlp.in_scale, p.mlp.in_zp))
    for row, expected in zip(x, ref, strict=True):
        result = agent.request({"t": "infer", "x": row.tolist()})
        assert result["model"] == 1 and result["us"] > 0
        assert np.abs(np.array(result["q"]) - expected).max() <= 1
        assert result["act"] == int(np.argmax(result["q"]))


def test_refused_loads_keep_the_running_model(agent, board):
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    other_key = generate_key()
    reply = load(agent, board, "npc-policy-int8-v2", 2, key=other_key)
    assert reply["t"] == "error" and reply["code"] == "refused" and reply["detail"].startswith("signature"), reply
    fault = agent.wait_for("fault")
    assert fault["kind"] == "signature" and fault["model"]["version"] == 2 and fault["prev"] == {"version": 1}
    tampered = {**signed(board, "npc-policy-int8-v2", 2), "sha256": "0" * 64}
    reply = agent.request({"t": "load", "path": "models/npc-policy-int8-v2.npcm", "manifest": tampered})
    # the signature covers the manifest, and is checked before the file is read: a changed hash fails it
    assert reply["code"] == "refused" and agent.wait_for("fault")["kind"] == "signature"
    reply = load(agent, board, "npc-fault-broken-int8", 3)
    assert reply["code"] == "refused" and agent.wait_for("fault")["kind"] == "parse"
    reply = load(agent, board, "npc-fault-oversize-int8", 4)
    assert reply["code"] == "refused", reply
    assert agent.wait_for("fault")["kind"] == "oom"
    assert agent.request({"t": "infer", "x": [0.0] * 48})["model"] == 1
    stats = agent.request({"t": "stats"})
    assert stats["refused"] == 4 and stats["loads"] == 1


def test_crash_within_probation_rolls_back_with_timing(agent, board):
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    reply = load(agent, board, "npc-fault-crash-int8", 5)
    assert reply["t"] == "loaded"  # it parses: the fault only shows when it runs
    fault = agent.wait_for("fault")
    assert fault["kind"] == "rollback" and fault["cause"] == "crash" and "IndexError" in fault["detail"]
    assert fault["model"] == {"version": 5} and fault["prev"] == {"version": 1}
    assert 0 <= fault["t_start"] - fault["t_switch"] < 3_000_000 and fault["t_fault"] >= fault["t_start"]
    assert 0 <= fault["rollback_us"] < 3_000_000
    assert agent.request({"t": "infer", "x": [0.1] * 48})["model"] == 1
    assert agent.request({"t": "stats"})["rollbacks"] == 1


def test_frame_loop_follows_the_scheduler_and_stops_on_request(agent, board):
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    agent.send({"t": "in", "seq": 0, "ch": "gaze", "ts": 0, "d": [0.4, 0.5, 0.9]})
    assert agent.request({"t": "start", "fps": 20, "vsync_hz": 40, "key_every": 1, "frames": 12})["t"] == "ack"
    frames = [agent.wait_for("frame") for _ in range(12)]
    stopped = agent.wait_for("stopped")
    assert stopped["frames"] == 12
    assert [f["i"] for f in frames] == list(range(12))
    ran = [f for f in frames if f["ran"]]
    assert ran and all(f["t1"] >= f["t0"] >= f["due"] for f in ran)
    assert all(f["due"] == f["vsync"] + 50_000 for f in ran)  # 25 ms apart: no debounce
    assert all(f["q"] <= 2 for f in frames) and all(f["skip"] for f in frames if not f["ran"])
    assert all(f["seq"] == 0 and f["model"] == 1 for f in ran)
    vsyncs = [f["vsync"] for f in sorted(frames, key=lambda f: f["i"])]
    assert set(np.diff(vsyncs)) == {25_000}
    assert agent.request({"t": "start", "fps": 20, "vsync_hz": 20})["t"] == "ack"
    agent.wait_for("frame")
    reply = agent.request({"t": "stop"})
    assert reply["t"] == "ack"
    stopped = agent.wait_for("stopped")
    assert agent.seen.index(stopped) < agent.seen.index(reply)  # the ack comes after the last frame


def test_stats_report_model_size_and_inference_time(agent, board):
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    for _ in range(5):
        agent.request({"t": "infer", "x": [0.2] * 48})
    stats = agent.request({"t": "stats"})
    assert stats["model_bytes"] == model_file("npc-policy-int8", "npcm").stat().st_size
    assert stats["infer_n"] >= 5 and 0 < stats["infer_us_mean"] <= stats["infer_us_max"]
    assert 0 < stats["mem"] <= stats["mem_peak"] < 300 * 1024


def test_a_verified_model_is_back_after_a_restart(board):
    first = MpyAgent(board)
    assert load(first, board, "npc-policy-int8-v2", 2)["t"] == "loaded"
    assert first.close() == 0
    second = MpyAgent(board)
    try:
        assert second.wait_for("hello")["model"]["version"] == 2
    finally:
        assert second.close() == 0


def test_debounce_pushes_close_inferences_16_ms_after_the_previous(agent, board):
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    assert agent.request({"t": "start", "fps": 60, "vsync_hz": 144, "frames": 10})["t"] == "ack"
    frames = [agent.wait_for("frame") for _ in range(10)]
    agent.wait_for("stopped")
    due = sorted(f["due"] for f in frames if f["ran"])
    assert len(due) >= 2
    ran = sorted((f for f in frames if f["ran"]), key=lambda f: f["due"])
    for prev, cur, f in zip(due, due[1:], ran[1:], strict=False):
        assert (cur == f["vsync"] + 16_666 and cur - prev >= 8_000) or cur == prev + 16_000


def test_update_fetches_over_coap_then_verifies_and_switches(agent, board, tmp_path):
    from bench.core.loop_thread import LoopThread
    from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
    from bench.ota.server import UpdateServer
    from bench.ota.store import ModelStore

    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(model_file("npc-policy-int8", "npcm"), key, name="npc-policy", fmt="npcm-int8", version=1)
    store.publish(model_file("npc-policy-int8-v2", "npcm"), key, name="npc-policy", fmt="npcm-int8", version=2)
    loop = LoopThread()
    server = UpdateServer(store)
    loop.run(server.start())
    try:
        manifest = store.manifest("npc-policy", 2)
        reply = agent.request(
            {
                "t": "update",
                "url": server.model_url("npc-policy", 2),
                "manifest": manifest,
                "delta": False,
                "coap": {"ack_timeout_ms": 50},
            }
        )
        assert reply["t"] == "updated", reply
        assert reply["model"]["version"] == 2 and reply["blocks"] == 7 and reply["bytes"] == 6376
        assert (board / "models" / "npc-policy-2.npcm").read_bytes() == model_file(
            "npc-policy-int8-v2", "npcm"
        ).read_bytes()
        assert agent.request({"t": "infer", "x": [0.3] * 48})["model"] == 2
        forged = {**manifest, "version": 3}  # its signature covers version 2
        reply = agent.request({"t": "update", "url": server.model_url("npc-policy", 2), "manifest": forged})
        assert reply["code"] == "refused" and agent.wait_for("fault")["kind"] == "signature"
        assert agent.request({"t": "hello"})["model"]["version"] == 2
    finally:
        loop.run(server.stop())
        loop.close()


def test_an_update_larger_than_the_free_heap_is_refused_before_anything_is_fetched(agent, board):
    """No server listens at the URL: a fetch would end as a `transfer` fault after its retransmissions, so an `oom`
    refusal shows the size was checked against the heap first. Nothing lands in updates/."""
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    manifest = signed(board, "npc-fault-oversize-int8", 2)
    request = {"t": "update", "url": "coap://127.0.0.1:9/models/npc-policy/2", "manifest": manifest}
    reply = agent.request({**request, "coap": {"ack_timeout_ms": 50, "max_retransmit": 1}})
    assert reply["code"] == "refused" and reply["detail"].startswith("oom"), reply
    fault = agent.wait_for("fault")
    assert fault["kind"] == "oom" and "not fetched" in fault["detail"], fault
    assert [p.name for p in (board / "updates").glob("*")] == [".keep"]  # the agent's keeper (docs/ota.md) only
    assert agent.request({"t": "infer", "x": [0.0] * 48})["model"] == 1


def test_a_model_with_other_inputs_is_refused_before_the_switch(agent, board):
    from bench.models import npcm
    from bench.models.policy import make_policy, quantize_policy
    from bench.models.tflite_read import Int8Policy

    narrow = make_policy((40, 16, 8), "narrow")
    data = npcm.encode(Int8Policy(quantize_policy(narrow, calibration_inputs(40)), None))
    (board / "models" / "narrow.npcm").write_bytes(data)
    assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
    reply = load(agent, board, "narrow", 2)
    assert reply["code"] == "refused" and "48 features -> 8 actions, found 40 -> 8" in reply["detail"]
    assert agent.wait_for("fault")["kind"] == "parse"
    assert agent.request({"t": "hello"})["model"]["version"] == 1


# a `machine` in the board folder, standing in for the port's: each level change of a pin is a console line with the
# agent clock's time (ticks_us, as the agent's frame records use)
RECORDING_MACHINE = """import sys, time
class Pin:
    OUT = 3
    def __init__(self, n, mode=-1, value=None):
        self.n = n
        if value is not None:
            self.value(value)
    def value(self, x):
        sys.stdout.write("pin %d %d %d\\n" % (self.n, x, time.ticks_us()))
    def on(self):
        self.value(1)
    def off(self):
        self.value(0)
"""


def test_the_inference_marker_is_high_around_each_inference_only_when_configured(board):
    (board / "machine.py").write_text(RECORDING_MACHINE)
    (board / "agent.json").write_text('{"mem_limit": 0, "marker_pin": 6}')
    agent = MpyAgent(board)
    try:
        assert load(agent, board, "npc-policy-int8", 1)["t"] == "loaded"
        assert agent.request({"t": "start", "fps": 20, "vsync_hz": 20, "frames": 6})["t"] == "ack"
        ran = [f for f in (agent.wait_for("frame") for _ in range(6)) if f["ran"]]
        agent.wait_for("stopped")
    finally:
        assert agent.close() == 0
    edges = [tuple(int(x) for x in line.split()[1:]) for line in agent.console if line.startswith("pin ")]
    assert edges[0][:2] == (6, 0)  # set up low
    highs = list(zip(edges[1::2], edges[2::2], strict=True))
    assert len(highs) == len(ran) >= 5
    for ((pin_on, level_on, t_on), (pin_off, level_off, t_off)), frame in zip(highs, ran, strict=True):
        assert (pin_on, level_on, pin_off, level_off) == (6, 1, 6, 0)
        assert frame["t0"] <= t_on and frame["t1"] <= t_off  # high from just after t0 to just after t1
        assert t_off - t_on <= frame["t1"] - frame["t0"] + 1_000
    (board / "agent.json").write_text('{"mem_limit": 0}')
    plain = MpyAgent(board)
    assert plain.close() == 0 and not [line for line in plain.console if line.startswith("pin ")]

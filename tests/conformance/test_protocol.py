"""Every request/reply of docs/protocol.md, malformed input, and clock sync, against each agent."""

from __future__ import annotations

import time
import zlib

import numpy as np
import pytest

from bench.agent import wire
from bench.agent.session import AgentError, AgentSession, LoopStart

pytestmark = pytest.mark.e2e  # real agent processes and the real tflite runtime


def test_hello_names_the_agent_and_its_model(agent):
    async def body(s: AgentSession):
        info = await s.hello()
        assert info["proto"] == wire.PROTO == 1
        assert isinstance(info["agent"], str) and info["agent"]
        assert info["model"]["name"] == "npc-policy" and info["model"]["version"] == 1
        assert len(info["model"]["sha256"]) == 64 and info["model"]["size"] > 0
        assert "rollback" in info["caps"] and "stats" in info["caps"]
        # the agent also announced itself unsolicited at start, after its console boot lines
        assert any(line.startswith("[hello]") for line in s.console)

    agent.run(body)


def test_ping_pong_maps_the_device_clock(agent):
    async def body(s: AgentSession):
        clock = await s.sync_clock(12)
        assert len(clock.samples) == 12 and clock.min_rtt_ns > 0
        assert all(b.d >= a.d for a, b in zip(clock.samples, clock.samples[1:], strict=False))
        # a device timestamp taken "now" maps close to the bench's now
        b0, b1, d = await s.ping()
        assert abs(s.bench_ns(d) - (b0 + b1) / 2) < (b1 - b0) / 2 + clock.min_rtt_ns + 2_000_000
        return clock

    clock = agent.run(body)
    if agent.kind == "host":  # same machine, same CLOCK_MONOTONIC: the offset is ~0
        assert abs(clock.offset_ns) < clock.uncertainty_ns + 1_000_000


def crc_line(body: bytes, crc: int | None = None) -> bytes:
    return b"~" + body + b"*" + b"%08x" % (zlib.crc32(body) if crc is None else crc) + b"\n"


@pytest.mark.parametrize(
    ("line", "code", "has_id"),
    [
        (crc_line(b'{"t":"hello","id":41}', crc=0), "bad_frame", True),
        (b'~{"t":"hello","id":42}\n', "bad_frame", True),
        (crc_line(b'{"t":"hello","id":'), "bad_json", False),
        (crc_line(b"[1,2,3]"), "bad_json", False),
        (crc_line(b'{"id":43}'), "bad_field", True),
        (crc_line(b'{"t":"dance","id":44}'), "unknown_type", True),
        (crc_line(b'{"t":"infer","id":45,"x":[1,2]}'), "bad_field", True),
        (crc_line(b'{"t":"load","id":46}'), "bad_field", True),
        (crc_line(b'{"t":"in","seq":1,"ch":"gaze","ts":1,"d":[1]}'), "bad_field", False),
        (crc_line(b'{"t":"in","seq":1,"ch":"smell","ts":1,"d":[1]}'), "bad_field", False),
        (b"~" + b"x" * 6000 + b"*00000000\n", "bad_frame", False),
    ],
    ids=[
        "crc",
        "no-crc",
        "cut-json",
        "not-object",
        "no-type",
        "unknown",
        "short-x",
        "load-no-path",
        "bad-gaze",
        "bad-channel",
        "oversized",
    ],
)
def test_malformed_lines_get_an_error_and_the_agent_lives_on(agent, line, code, has_id):
    async def body(s: AgentSession):
        await s.send_raw(b"console text from the bench is ignored\n")
        await s.send_raw(line)
        deadline = time.monotonic() + 5
        while not any(f"({code}" in c or f"code': '{code}'" in c for c in s.console):
            assert time.monotonic() < deadline, s.console[-5:]
            await s.ping()  # the agent keeps answering meanwhile
        hit = next(c for c in s.console if f"code': '{code}'" in c)
        assert ("'id': 4" in hit) == has_id
        assert (await s.hello())["proto"] == 1
        return await s.stats()

    stats = agent.run(body)
    assert stats["errors"].get(code, 0) >= 1


def test_unknown_request_raises_agent_error(agent):
    async def body(s: AgentSession):
        with pytest.raises(AgentError) as err:
            await s.request("teleport", where="moon")
        assert err.value.code == "unknown_type" and "teleport" in err.value.detail

    agent.run(body)


def test_stats_report_memory_and_counts(agent):
    async def body(s: AgentSession):
        before = await s.stats()
        await s.start(LoopStart(fps=60, vsync_hz=60, frames=6))
        frames = [r async for r in s.frames(timeout=10)]
        after = await s.stats()
        return before, frames, after

    before, frames, after = agent.run(body)
    assert len(frames) == 6
    for st in (before, after):
        assert st["mem"] > 0 and st["mem_peak"] >= st["mem"]
    assert after["frames"] - before["frames"] == 6
    assert after["inferences"] - before["inferences"] == sum(f.ran for f in frames)


def test_infer_matches_the_numpy_reference(agent):
    rng = np.random.default_rng(7)
    xs = np.concatenate([rng.uniform(-1, 1, (6, 48)), np.zeros((1, 48)), np.full((1, 48), 0.5)])

    async def body(s: AgentSession):
        return [await s.infer(list(map(float, x))) for x in xs]

    results = agent.run(body)
    ref = agent.reference("npc-policy-int8", xs)
    step = 1 / 256
    for res, want in zip(results, ref, strict=True):
        y = np.array(res["y"])
        assert y.shape == (8,) and res["model"] == 1 and res["us"] >= 0
        assert np.max(np.abs(y - want)) <= step + 1e-6  # int8 runtimes agree within one step
        assert res["p"] == pytest.approx(y[res["act"]], abs=1e-6) and y[res["act"]] == y.max()


def test_shutdown_says_bye_and_exits(agent):
    async def body(s: AgentSession):
        reply = await s.shutdown()
        assert reply["t"] == "bye"
        proc = s.transport.proc
        await proc.wait()
        return proc.returncode

    assert agent.run(body) == 0

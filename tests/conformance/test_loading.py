"""Secure model loading against each agent: switch, refusals, crash and OOM rollback with timing."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from bench.agent.session import AgentError, AgentSession, LoopStart
from tests.conformance.harness import MODELS

pytestmark = pytest.mark.e2e  # real agent processes and the real tflite runtime

PROBATION_US = 3_000_000
X = [0.25] * 24 + [-0.5] * 24


def test_load_switches_to_the_new_model(agent):
    path, manifest = agent.deploy("npc-policy-int8-v2", 2)

    async def body(s: AgentSession):
        before = (await s.ping())[2]
        reply = await s.load(path, manifest)
        assert reply["model"]["version"] == 2 and reply["model"]["sha256"] == manifest["sha256"]
        assert reply["verify_us"] > 0 and reply["switch_us"] >= 0
        # the request's receipt on the device's clock: where a first-frame time on that clock starts
        assert before <= reply["rx"] <= (await s.ping())[2]
        assert (await s.hello())["model"]["version"] == 2
        return await s.infer(X)

    res = agent.run(body)
    assert res["model"] == 2
    want = agent.reference("npc-policy-int8-v2", np.array([X]))[0]
    assert np.max(np.abs(np.array(res["y"]) - want)) <= 1 / 256 + 1e-6


@pytest.mark.parametrize(("tamper", "kind"), [("sig", "signature"), ("unsigned", "signature"), ("bytes", "hash")])
def test_refused_models_never_run_and_the_old_one_keeps_running(agent, tamper, kind):
    path, manifest = agent.deploy("npc-policy-int8-v2", 2, tamper=tamper)

    async def body(s: AgentSession):
        await s.start(LoopStart(fps=30, vsync_hz=30, frames=20))
        await asyncio.sleep(0.15)
        with pytest.raises(AgentError) as err:
            await s.load(path, manifest)
        assert err.value.code == "refused"
        fault = await s.next_fault(5)
        recs = [r async for r in s.frames(timeout=10)]
        info = await s.hello()
        res = await s.infer(X)
        return fault, recs, info, res

    fault, recs, info, res = agent.run(body)
    assert fault["kind"] == kind and fault["model"]["version"] == 2
    assert info["model"]["version"] == 1 and res["model"] == 1
    assert len(recs) == 20 and all(r.model == 1 for r in recs if r.ran)
    want = agent.reference("npc-policy-int8", np.array([X]))[0]
    assert np.max(np.abs(np.array(res["y"]) - want)) <= 1 / 256 + 1e-6


def test_cold_starts_back_to_back_and_a_refused_one_keeps_the_model(agent):
    """Ten cold loads in a row (the nightly's first-frame figure), each followed by a decision: none runs out
    of memory (the MicroPython agent frees its models first), and a refused cold load leaves the model running."""
    path, manifest = agent.deploy("npc-policy-int8-v2", 2)
    bad_path, bad_manifest = agent.deploy("npc-policy-int8", 3, tamper="bytes")

    async def body(s: AgentSession):
        versions = []
        for _ in range(10):
            versions.append((await s.load(path, manifest, cold=True))["model"]["version"])
            await s.start(LoopStart(fps=30, vsync_hz=30, frames=2))
            versions += [r.model for r in [r async for r in s.frames(timeout=10)] if r.ran]
        with pytest.raises(AgentError) as err:
            await s.load(bad_path, bad_manifest, cold=True)
        return versions, err.value.code, s.faults, await s.hello(), await s.infer(X)

    versions, code, faults, info, res = agent.run(body)
    assert versions and set(versions) == {2}
    assert code == "refused" and [f["kind"] for f in faults] == ["hash"]
    assert info["model"]["version"] == 2 and res["model"] == 2


def test_a_load_after_a_long_input_stream_finds_memory(agent):
    """Minutes of inputs scatter small long-lived objects over a small heap: with 170 kB free the MicroPython
    agent could not find 3 kB in one piece for a layer's weights, so an update refused with 'oom'. The agent
    reads a new model into the arrays kept from the one before (npcnn.Buffers)."""
    if agent.kind != "micropython":
        pytest.skip("a heap of its own size only on the MicroPython agent")
    path, manifest = agent.deploy("npc-policy-int8-v2", 2)

    async def body(s: AgentSession):
        await s.start(LoopStart(fps=20, vsync_hz=20))
        t0 = time.monotonic()
        while (ts := (time.monotonic() - t0) * 1000) < 12_000:
            await s.send_input("mocap", [0.01 * j for j in range(51)], ts)
            await s.send_input("gaze", [0.5, 0.5, 0.9], ts)
            await s.send_input("voicef", [0.1, 0.05, 180.0, 1], ts)
            await asyncio.sleep(0.005)
        await s.stop()
        async for _ in s.frames(timeout=10):
            pass
        return [(await s.load(path, manifest))["model"]["version"] for _ in range(3)], s.faults

    versions, faults = agent.run(body, timeout=120)
    assert versions == [2, 2, 2] and faults == []


def test_unparsable_and_missing_models_are_refused(agent):
    path, manifest = agent.deploy(agent.broken_model, 5)

    async def body(s: AgentSession):
        with pytest.raises(AgentError):
            await s.load(path, manifest)
        with pytest.raises(AgentError) as err:
            await s.load("no-such-model." + agent.model_ext, manifest)
        assert err.value.code == "refused"
        return s.faults, await s.hello()

    faults, info = agent.run(body)
    assert [f["kind"] for f in faults] == ["parse", "parse"]
    assert info["model"]["version"] == 1


@pytest.mark.parametrize("cause", ["crash", "oom"])
def test_faulting_model_is_rolled_back_within_probation(agent, cause):
    fixture = agent.crash_model if cause == "crash" else agent.oom_model
    path, manifest = agent.deploy(fixture, 7)

    async def body(s: AgentSession):
        await s.start(LoopStart(fps=30, vsync_hz=30, frames=30))
        await asyncio.sleep(0.2)
        reply = await s.load(path, manifest, timeout=30)
        assert reply["model"]["version"] == 7  # the switch happened; the watchdog undoes it
        fault = await s.next_fault(PROBATION_US / 1e6 + 10)
        recs = [r async for r in s.frames(timeout=15)]
        return fault, recs, await s.hello(), await s.infer(X), await s.stats()

    fault, recs, info, res, stats = agent.run(body)
    assert fault["kind"] == "rollback" and fault["cause"] == cause
    assert fault["model"]["version"] == 7 and fault["prev"]["version"] == 1
    # the faulting inference began within probation; detection follows it (a 1.3 GB allocation takes
    # seconds on a loaded machine). Without `t_start`, its detection must be within probation.
    began = fault.get("t_start", fault["t_fault"])
    assert 0 <= began - fault["t_switch"] < PROBATION_US
    assert fault["t_fault"] >= began
    assert 0 <= fault["rollback_us"] < 500_000
    assert info["model"]["version"] == 1 and res["model"] == 1
    # no frame was lost and none ran the faulty model to a decision
    assert sorted(r.i for r in recs) == list(range(30))
    assert all(r.model == 1 and r.act is not None for r in recs if r.ran)
    assert stats["rollbacks"] == 1


def test_float32_model_matches_the_float_reference(agent):
    from bench.models.catalogue import policy
    from bench.testkit.reference import float_infer

    async def caps(s: AgentSession):
        return s.info["caps"]

    if "float32" not in agent.run(caps) or not (MODELS / f"npc-policy-f32.{agent.model_ext}").is_file():
        pytest.skip(f"the {agent.kind} agent runs no float32 models")
    path, manifest = agent.deploy("npc-policy-f32", 2)
    xs = np.random.default_rng(3).uniform(-1, 1, (5, 48))

    async def body(s: AgentSession):
        await s.load(path, manifest)
        return [await s.infer(list(map(float, x))) for x in xs]

    results = agent.run(body)
    want = float_infer(policy("npc-policy", 1)[0], xs)
    for res, w in zip(results, want, strict=True):
        assert res["model"] == 2
        np.testing.assert_allclose(res["y"], w, atol=1e-5)

"""What an agent runs after a restart: the model it last switched to, never one that was rolled back."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench.agent.session import AgentSession

pytestmark = pytest.mark.e2e


async def version(s: AgentSession) -> int:
    return (await s.hello())["model"]["version"]


def test_a_loaded_model_survives_a_restart_and_a_rolled_back_one_does_not(agent):
    good_path, good = agent.deploy("npc-policy-int8-v2", 2)
    bad_path, bad = agent.deploy(agent.crash_model, 3)

    async def load_good(s: AgentSession):
        await s.load(good_path, good)
        return await version(s)

    async def load_bad(s: AgentSession):
        await s.load(bad_path, bad)
        fault = await s.next_fault(10)
        return fault, await version(s)

    assert agent.run(load_good) == 2
    assert agent.run(version) == 2  # restarted: still v2
    fault, running = agent.run(load_bad)
    assert fault["kind"] == "rollback" and running == 2
    assert agent.run(version) == 2  # restarted: the rolled-back model was not kept


def test_a_remembered_model_that_faults_at_start_falls_back_to_the_deployed_one(agent):
    # both reference agents keep the record in models/current.json: {"path", "manifest"}
    bad_path, bad = agent.deploy(agent.crash_model, 3)
    record = {"path": str(agent.models_dir / bad_path), "manifest": bad}
    (agent.models_dir / "current.json").write_text(json.dumps(record))

    async def body(s: AgentSession):
        await asyncio.sleep(0.2)  # the fault from start-up arrives after the hello
        return s.faults, await version(s)

    faults, running = agent.run(body)
    assert running == 1
    assert faults and faults[0]["kind"] == "rollback" and faults[0]["model"]["version"] == 3
    assert agent.run(version) == 1  # and the record now names the deployed model


def test_a_fifo_remembered_as_the_model_does_not_stop_the_start(agent) -> None:
    """`models/current.json` naming a FIFO (nobody writes to it): the agent starts with its deployed model and
    answers, instead of blocking in open() before its hello."""
    import os

    _, manifest = agent.deploy("npc-policy-int8-v2", 2)
    os.mkfifo(agent.models_dir / "fifo.bin")
    record = {"path": str(agent.models_dir / "fifo.bin"), "manifest": manifest}
    (agent.models_dir / "current.json").write_text(json.dumps(record))

    async def body(s: AgentSession):
        return await s.hello()

    hello = agent.run(body, timeout=20)
    assert hello["model"]["version"] == 1

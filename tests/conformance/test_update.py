"""`update` against each agent: a full model over CoAP from the bench's update server, then the switch."""

from __future__ import annotations

import pytest

from bench.agent.session import AgentError, AgentSession
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.signing import DEV_PRIVATE_KEY, load_private_key
from tests.conformance.harness import MODELS

pytestmark = pytest.mark.e2e  # real agents, the real aiocoap server, UDP on loopback

COAP = {"ack_timeout_ms": 100, "ack_random_factor": 1.5, "max_retransmit": 6}


def test_full_update_switches_and_a_forged_manifest_is_refused(agent, tmp_path):
    ext = agent.model_ext
    fmt = "npcm-int8" if ext == "npcm" else "tflite-int8"
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(MODELS / f"npc-policy-int8.{ext}", key, name="npc-policy", fmt=fmt)
    v2 = store.publish(MODELS / f"npc-policy-int8-v2.{ext}", key, name="npc-policy", fmt=fmt).manifest

    async def body(s: AgentSession):
        if "update-coap" not in s.info["caps"]:
            pytest.skip(f"the {agent.kind} agent cannot update over CoAP here")
        async with UpdateServer(store) as srv:
            with pytest.raises(AgentError) as err:
                await s.update(srv.model_url("npc-policy", 2), {**v2, "version": 9}, coap=COAP, timeout=60)
            assert err.value.code == "refused"
            reply = await s.update(srv.model_url("npc-policy", 2), v2, coap=COAP, timeout=120)
        await s.start(fps=20, vsync_hz=20, frames=3)
        recs = [r async for r in s.frames(timeout=10)]
        return reply, recs, await s.hello(), s.faults

    reply, recs, hello, faults = agent.run(body)
    assert faults[0]["kind"] == "signature"
    assert reply["t"] == "updated" and reply["model"]["version"] == 2
    assert reply["blocks"] == -(-v2["size"] // 1024) and reply["bytes"] >= v2["size"]
    assert hello["model"]["version"] == 2 and all(r.model == 2 for r in recs if r.ran)

"""host/ agent `update`: a real CoAP fetch from the bench's update server, verified, then switched."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.agent.session import AgentError, AgentSession, LoopStart
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from tests.conformance.harness import MODELS, HostAgent

pytestmark = pytest.mark.e2e


def test_delta_update_switches_and_a_forged_manifest_is_refused(tmp_path: Path):
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(MODELS / "npc-policy-int8.tflite", key, name="npc-policy", fmt="tflite-int8")
    v2 = store.publish(MODELS / "npc-policy-int8-v2.tflite", key, name="npc-policy", fmt="tflite-int8").manifest
    agent = HostAgent(tmp_path / "agent")

    async def body(s: AgentSession):
        assert "update-coap" in s.info["caps"]
        async with UpdateServer(store) as srv:
            forged = {**v2, "version": 9}
            with pytest.raises(AgentError, match="signature"):
                await s.update(srv.model_url("npc-policy", 9), forged, timeout=30)
            coap = {"ack_timeout_ms": 50, "ack_random_factor": 1.5, "max_retransmit": 6}
            reply = await s.update(srv.delta_url("npc-policy", 2, 1), v2, delta=True, coap=coap, timeout=60)
        await s.start(LoopStart(fps=30, vsync_hz=30, frames=3))
        recs = [r async for r in s.frames(timeout=10)]
        return reply, recs, await s.hello()

    async def main():
        async with agent.session() as s:
            return await body(s)

    reply, recs, hello = asyncio.run(main())
    assert reply["t"] == "updated" and reply["model"]["version"] == 2
    assert reply["blocks"] >= 1 and reply["delta_saved"] > 0 and reply["switch_us"] >= 0
    assert hello["model"]["version"] == 2 and all(r.model == 2 for r in recs)

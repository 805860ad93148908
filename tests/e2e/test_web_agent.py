"""The web agent's own faults in Chromium: a model whose tensors do not fit in WebAssembly's memory makes the
runtime fail at its first inference (not the agent's memory limit: there is none here) and is rolled back.

LiteRT.js 2.5.3's release WASM build does not always raise when its arena cannot be had: depending on how much
of the heap is already in use it throws while creating a tensor buffer (cause `oom`) or returns an output that
is not a probability distribution, which the agent's output check reports (cause `crash`)."""

from __future__ import annotations

import pytest

from bench.agent.session import AgentSession
from bench.models import signing
from bench.models.catalogue import policy
from bench.models.tflite_build import int8_graph, serialize

pytestmark = pytest.mark.e2e

WASM_OOM_BATCH = 1 << 25  # 33.5 M rows: the input tensor alone is 1.6 GB, past what the WASM heap can grow to


@pytest.fixture
def web_agent(tmp_path):
    from tests.conformance.harness import WebAgent

    class Unlimited(WebAgent):
        mem_limit_mb = 0  # no agent-side limit: only the runtime itself can fail

    return Unlimited(tmp_path / "web")


@pytest.mark.slow  # opt-in (--run-slow): the nightly e2e's fault stage rolls the web agent back from an oom by default
def test_a_model_the_wasm_heap_cannot_hold_is_rolled_back(web_agent):
    model = web_agent.models_dir / "npc-wasm-oom-int8.tflite"
    model.write_bytes(serialize(int8_graph(policy("npc-policy", 1)[1], batch=WASM_OOM_BATCH), "FAULT: WASM OOM"))
    manifest = signing.sign_manifest(
        signing.model_manifest(model, "npc-policy", 9, "tflite-int8"), signing.load_private_key(signing.DEV_PRIVATE_KEY)
    )

    async def body(s: AgentSession):
        reply = await s.load(model.name, manifest, timeout=60)
        assert reply["model"]["version"] == 9
        fault = await s.next_fault(30)
        return fault, await s.hello(), await s.infer([0.1] * 48)

    fault, hello, res = web_agent.run(body, timeout=30)
    assert fault["kind"] == "rollback" and fault["cause"] in ("oom", "crash"), fault["detail"]
    assert "heap grew" not in fault["detail"]  # the runtime itself failed, not the agent's limit check
    assert 0 <= fault["t_start"] - fault["t_switch"] < 3_000_000 and fault["rollback_us"] < 500_000
    assert hello["model"]["version"] == 1 and res["model"] == 1

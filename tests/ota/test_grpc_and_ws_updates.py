"""The gRPC channel (host agent) and the WebSocket channel (web agent): signed models from one store, a forged
manifest refused with the running model kept, a transfer cut in the middle resumed from its offset and
verified before the switch."""

from __future__ import annotations

import pytest

from bench.agent.session import AgentError, AgentSession
from bench.models.signing import DEV_PRIVATE_KEY, generate_key, load_private_key, sign_manifest
from bench.ota.grpc_server import GrpcUpdateServer
from bench.ota.store import ModelStore
from bench.ota.ws_server import WsUpdateServer
from tests.conformance.harness import MODELS, HostAgent

pytestmark = pytest.mark.e2e  # real agents (host: Python + ai-edge-litert; web: Chromium + LiteRT.js)


def _store(tmp_path, model: str = "npc-policy-large-int8") -> tuple[ModelStore, dict]:
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(MODELS / "npc-policy-int8.tflite", key, name="npc-policy", fmt="tflite-int8")
    v2 = store.publish(MODELS / f"{model}.tflite", key, name="npc-policy", fmt="tflite-int8").manifest
    return store, v2


def _url(base: str, manifest: dict) -> str:
    return f"{base}/models/npc-policy/tflite-int8/{manifest['version']}"


def test_grpc_update_cut_in_the_middle_resumes_from_its_offset(tmp_path):
    agent = HostAgent(tmp_path / "agent")
    store, v2 = _store(tmp_path)  # the large model: several 16 KB chunks

    async def body(s: AgentSession):
        assert "update-grpc" in s.info["caps"]
        async with GrpcUpdateServer(store) as srv:
            base = f"grpc://127.0.0.1:{srv.port}"
            forged = sign_manifest({k: v for k, v in v2.items() if k != "sig"}, generate_key())
            with pytest.raises(AgentError):
                await s.update(_url(base, v2), forged, timeout=60)
            srv.cut_after = 2 * srv.chunk
            with pytest.raises(AgentError) as err:
                await s.update(_url(base, v2), v2, timeout=60)
            assert "transfer" in err.value.detail
            assert (await s.hello())["model"]["version"] == 1  # the running model is untouched
            srv.cut_after = None
            reply = await s.update(_url(base, v2), v2, timeout=60)
            return reply, srv.served, await s.hello(), s.faults

    reply, served, hello, faults = agent.run(body)
    assert [f["kind"] for f in faults[:2]] == ["signature", "transfer"]
    assert reply["resumed_from"] == 2 * 16384 and reply["bytes"] == v2["size"] - 2 * 16384
    assert served["models/npc-policy/tflite-int8/2"].offsets == [0, 2 * 16384]
    assert hello["model"]["version"] == 2 and hello["model"]["sha256"] == v2["sha256"]


@pytest.fixture
def web_agent(tmp_path):
    from tests.conformance.harness import WebAgent

    return WebAgent(tmp_path / "web")


def test_web_update_over_websocket_forged_refused_cut_resumed_delta_applied(tmp_path, web_agent):
    store, v2 = _store(tmp_path)

    async def body(s: AgentSession):
        async with WsUpdateServer(store) as srv:
            base = f"ws://127.0.0.1:{srv.port}"
            forged = sign_manifest({k: v for k, v in v2.items() if k != "sig"}, generate_key())
            with pytest.raises(AgentError) as err:
                await s.update(_url(base, v2), forged, timeout=60)
            assert "signature" in err.value.detail
            srv.cut_after = srv.chunk
            with pytest.raises(AgentError) as err:
                await s.update(_url(base, v2), v2, timeout=60)
            assert "transfer" in err.value.detail
            assert (await s.hello())["model"]["version"] == 1
            srv.cut_after = None
            reply = await s.update(_url(base, v2), v2, timeout=60)
            return reply, srv.served, await s.hello(), s.faults

    reply, served, hello, faults = web_agent.run(body, timeout=30)
    assert [f["kind"] for f in faults[:2]] == ["signature", "transfer"]
    assert reply["resumed_from"] == 16384 and reply["bytes"] == v2["size"] - 16384
    assert served["models/npc-policy/tflite-int8/2"].offsets == [0, 16384]
    assert hello["model"]["sha256"] == v2["sha256"]


def test_web_delta_update_is_patched_in_the_page(tmp_path, web_agent):
    store, v2 = _store(tmp_path, "npc-policy-int8-v2")

    async def body(s: AgentSession):
        async with WsUpdateServer(store) as srv:
            url = _url(f"ws://127.0.0.1:{srv.port}", v2) + "/delta-zlib/1"
            reply = await s.update(url, v2, delta=True, timeout=60)
            return reply, await s.hello()

    reply, hello = web_agent.run(body, timeout=30)
    assert reply["delta_saved"] > 0 and reply["bytes"] < v2["size"]
    assert hello["model"]["sha256"] == v2["sha256"]

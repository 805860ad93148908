"""`update` against each agent: a full model over CoAP from the bench's update server, then the switch."""

from __future__ import annotations

import pytest

from bench.agent.session import AgentError, AgentSession, LoopStart
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from tests.conformance.harness import MODELS

pytestmark = pytest.mark.e2e  # real agents, the real aiocoap server, UDP on loopback

COAP = {"ack_timeout_ms": 100, "ack_random_factor": 1.5, "max_retransmit": 6}


def test_full_update_switches_and_a_forged_manifest_is_refused(agent, tmp_path):
    store = ModelStore(tmp_path / "store")
    _, v2 = agent.publish(store, "npc-policy-int8", "npc-policy-int8-v2")

    async def body(s: AgentSession):
        agent.needs_coap_updates(s)
        async with UpdateServer(store) as srv:
            with pytest.raises(AgentError) as err:
                await s.update(srv.model_url("npc-policy", 2), {**v2, "version": 9}, coap=COAP, timeout=60)
            assert err.value.code == "refused"
            reply = await s.update(srv.model_url("npc-policy", 2), v2, coap=COAP, timeout=120)
        await s.start(LoopStart(fps=20, vsync_hz=20, frames=3))
        recs = [r async for r in s.frames(timeout=10)]
        return reply, recs, await s.hello(), s.faults

    reply, recs, hello, faults = agent.run(body)
    assert faults[0]["kind"] == "signature"
    assert reply["t"] == "updated" and reply["model"]["version"] == 2
    assert reply["blocks"] == -(-v2["size"] // 1024) and reply["bytes"] >= v2["size"]
    assert hello["model"]["version"] == 2 and all(r.model == 2 for r in recs if r.ran)


def _tree(folder) -> dict[str, str]:
    """Every file under `folder` (relative path -> sha256), and every folder (-> "dir")."""
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


def test_a_refused_update_leaves_every_installed_file_byte_identical(agent, tmp_path):
    """Issue 31 case 1: an update for the installed version signed by a key the board does not trust, and a
    trusted manifest whose transfer brings other bytes (wrong sha256), are refused, and the models folder is
    byte for byte what it was (the MicroPython agent stored the attacker's bytes before it checked)."""
    from bench.models.signing import generate_key
    from bench.ota.ws_server import WsUpdateServer

    ext = agent.model_ext
    fmt = "npcm-int8" if ext == "npcm" else "tflite-int8"
    key = load_private_key(DEV_PRIVATE_KEY)
    store, evil = ModelStore(tmp_path / "store"), ModelStore(tmp_path / "evil")
    store.publish(MODELS / f"npc-policy-int8.{ext}", key, name="npc-policy", fmt=fmt)
    v2 = store.publish(MODELS / f"npc-policy-int8-v2.{ext}", key, name="npc-policy", fmt=fmt).manifest
    attacker = generate_key()
    evil.publish(MODELS / f"npc-policy-int8.{ext}", attacker, name="npc-policy", fmt=fmt)
    forged = evil.publish(MODELS / f"npc-fault-crash-int8.{ext}", attacker, name="npc-policy", fmt=fmt).manifest
    assert forged["version"] == v2["version"] and forged["sha256"] != v2["sha256"]

    async def body(s: AgentSession):
        ws = "update-ws" in s.info["caps"] and "update-coap" not in s.info["caps"]
        servers = (WsUpdateServer(store), WsUpdateServer(evil)) if ws else (UpdateServer(store), UpdateServer(evil))
        async with servers[0] as good, servers[1] as bad:

            def url(srv) -> str:
                return f"ws://127.0.0.1:{srv.port}/models/npc-policy/{fmt}/2" if ws else srv.model_url("npc-policy", 2)

            await s.update(url(good), v2, coap=COAP, timeout=120)  # models/ now holds version 2
            before = _tree(agent.models_dir)
            kinds = []
            for manifest, srv in ((forged, bad), (v2, bad)):  # untrusted key; trusted manifest, other bytes
                with pytest.raises(AgentError) as err:
                    await s.update(url(srv), manifest, coap=COAP, timeout=120)
                assert err.value.code == "refused"
                kinds.append(s.faults[-1]["kind"])
            after = _tree(agent.models_dir)
            return before, after, kinds, await s.hello()

    before, after, kinds, hello = agent.run(body)
    assert kinds == ["signature", "hash"]
    assert after == before
    assert any(h != "dir" and name.endswith(f".{ext}") for name, h in before.items())
    assert hello["model"]["version"] == 2 and hello["model"]["sha256"] == v2["sha256"]


def test_pings_and_inputs_are_answered_while_an_update_waits_for_a_silent_server(agent, tmp_path):
    """An update whose server never answers (a UDP socket that reads nothing) waits out its retransmissions, and
    meanwhile the agent still answers pings at once and takes inputs; the update then fails as a transfer error
    and the old model runs on."""
    import asyncio
    import socket
    import time

    (v2,) = agent.publish(ModelStore(tmp_path / "store"), "npc-policy-int8-v2")
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    url = f"coap://127.0.0.1:{silent.getsockname()[1]}/models/npc-policy/2/npcm"

    async def body(s: AgentSession):
        agent.needs_coap_updates(s)
        coap = {"ack_timeout_ms": 1500, "ack_random_factor": 1.0, "max_retransmit": 1}  # ~4.5 s of waiting
        update = asyncio.ensure_future(s.update(url, v2, coap=coap, timeout=60))
        await asyncio.sleep(0.5)
        pings = []
        while not update.done() and len(pings) < 5:  # each answered while the update still waits
            t0 = time.monotonic()
            await s.request("ping", timeout=5, b0=time.monotonic_ns())
            pings.append(time.monotonic() - t0)
            await s.send_input("gaze", [0.5, 0.5, 0.9], 0)
            await asyncio.sleep(0.2)
        with pytest.raises(AgentError) as err:
            await update
        return pings, err.value, await s.stats(), await s.hello()

    try:
        pings, err, stats, hello = agent.run(body)
    finally:
        silent.close()
    assert len(pings) >= 2, pings  # the update waited for its server
    assert max(pings) < 0.5, pings  # answered while the update waited (a blocked agent answers after ~4 s)
    assert stats["inputs"] >= len(pings)
    assert "transfer" in str(err) and hello["model"]["version"] == 1

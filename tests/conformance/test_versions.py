"""Models only go forward, and what runs is what was verified (docs/protocol.md, `load` and `update`): a signed
model older than the running one, or of another name than the device's line, is refused with a `version` fault
unless the request says `allow_downgrade`; a model file changed while it loads never runs under the manifest of
the bytes it had."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from bench.agent.session import AgentError, AgentSession
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.store import ModelStore
from tests.conformance.harness import MODELS

pytestmark = pytest.mark.e2e

COAP = {"ack_timeout_ms": 100, "ack_random_factor": 1.5, "max_retransmit": 6}


def test_an_older_or_foreign_signed_model_is_refused_unless_allowed(agent) -> None:
    """Before, v2 -> v1 and a signed `npc-fault-crash@99` both loaded without a word."""
    v2_path, v2 = agent.deploy("npc-policy-int8-v2", 2)
    v1_path, v1 = agent.deploy("npc-policy-int8", 1)
    crash_path, crash = agent.deploy(agent.crash_model, 99, name="npc-fault-crash")

    async def body(s: AgentSession):
        await s.load(v2_path, v2)
        refusals = []
        for path, manifest in ((v1_path, v1), (crash_path, crash)):
            with pytest.raises(AgentError) as err:
                await s.load(path, manifest)
            refusals.append((err.value.code, s.faults[-1]))
        running = (await s.hello())["model"]
        allowed = await s.load(v1_path, v1, allow_downgrade=True)
        return refusals, running, allowed, await s.stats()

    refusals, running, allowed, stats = agent.run(body)
    assert [code for code, _ in refusals] == ["refused", "refused"]
    for _, fault in refusals:
        assert fault["kind"] == "version" and "allow_downgrade" in fault["detail"], fault
        assert fault["prev"] == {"version": 2}
    assert refusals[0][1]["model"]["version"] == 1 and refusals[1][1]["model"]["name"] == "npc-fault-crash"
    assert running["version"] == 2 and running["sha256"] == v2["sha256"]
    assert allowed["model"]["version"] == 1 and stats["refused"] == 2


def test_an_update_to_an_older_version_is_refused_before_any_transfer(agent, tmp_path) -> None:
    """`update` to v1 while v2 runs: a `version` refusal before a byte is fetched (the server sees one transfer,
    v2's); with allow_downgrade it installs."""
    from bench.ota.server import UpdateServer
    from bench.ota.ws_server import WsUpdateServer

    ext = agent.model_ext
    fmt = "npcm-int8" if ext == "npcm" else "tflite-int8"
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    v1 = store.publish(MODELS / f"npc-policy-int8.{ext}", key, name="npc-policy", fmt=fmt).manifest
    v2 = store.publish(MODELS / f"npc-policy-int8-v2.{ext}", key, name="npc-policy", fmt=fmt).manifest

    async def body(s: AgentSession):
        ws = "update-ws" in s.info["caps"] and "update-coap" not in s.info["caps"]
        async with WsUpdateServer(store) if ws else UpdateServer(store) as srv:

            def url(version: int) -> str:
                if ws:
                    return f"ws://127.0.0.1:{srv.port}/models/npc-policy/{fmt}/{version}"
                return srv.model_url("npc-policy", version)

            await s.update(url(2), v2, coap=COAP, timeout=120)
            with pytest.raises(AgentError) as err:
                await s.update(url(1), v1, coap=COAP, timeout=120)
            fault = s.faults[-1]
            running = (await s.hello())["model"]
            allowed = await s.update(url(1), v1, coap=COAP, timeout=120, allow_downgrade=True)
            return err.value, fault, running, allowed

    err, fault, running, allowed = agent.run(body)
    assert err.code == "refused" and fault["kind"] == "version", (err.reply, fault)
    assert running["version"] == 2
    assert allowed["model"]["version"] == 1


def test_a_model_file_swapped_while_it_loads_never_runs_under_the_other_manifest(agent) -> None:
    """A thread swaps the file between v1's and v2's bytes while v1's manifest is loaded again and again: every load
    either is refused (`hash`) or runs v1's bytes (its decisions are v1's). Before, the MicroPython agent hashed the
    file and then opened it again to parse it: v2's bytes ran under v1's manifest in 77 of 300 loads."""
    path, v1 = agent.deploy("npc-policy-int8", 1)
    v1_bytes = (agent.models_dir / path).read_bytes()
    v2_bytes = (MODELS / f"npc-policy-int8-v2.{agent.model_ext}").read_bytes()
    x = np.linspace(-1, 1, 48)
    want = agent.reference("npc-policy-int8", x[None, :])[0]
    other = agent.reference("npc-policy-int8-v2", x[None, :])[0]
    assert np.abs(want - other).max() > 2 / 256  # the two models tell apart
    stop = threading.Event()

    def swap() -> None:
        target = agent.models_dir / path
        tmp = agent.models_dir / "swap.tmp"
        while not stop.is_set():
            for data in (v2_bytes, v1_bytes):
                tmp.write_bytes(data)
                os.replace(tmp, target)

    async def body(s: AgentSession):
        outcomes = []
        for _ in range(40):
            try:
                await s.load(path, v1, timeout=60)
            except AgentError as exc:
                outcomes.append(("refused", s.faults[-1]["kind"], exc.code))
                continue
            y = np.asarray((await s.infer(list(x)))["y"])
            outcomes.append(("ran", float(np.abs(y - want).max()), float(np.abs(y - other).max())))
        return outcomes

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        outcomes = agent.run(body, timeout=60)
    finally:
        stop.set()
        swapper.join()
    ran = [o for o in outcomes if o[0] == "ran"]
    assert all(o[1] == "hash" for o in outcomes if o[0] == "refused"), outcomes
    assert all(o[1] < 1.5 / 256 for o in ran), [o for o in ran if o[1] >= 1.5 / 256]

"""Transfers are bounded on every agent that updates over CoAP (docs/protocol.md, `update`, "Bounds"): a server
that breaks a bound is refused, writes nothing past the signed size and leaves nothing behind; a delta manifest
over 4 KB, nested too deep, or not an object of typed fields is a `parse` refusal with a fault record."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from aiocoap import Message
from aiocoap.numbers.codes import Code
from aiocoap.numbers.types import Type
from aiocoap.optiontypes import BlockOption

from bench.agent.session import AgentError, AgentSession
from bench.ota.store import ModelStore
from tests.conformance.harness import MODELS

pytestmark = pytest.mark.e2e

COAP = {"ack_timeout_ms": 100, "ack_random_factor": 1.0, "max_retransmit": 2}


class Hostile(asyncio.DatagramProtocol):
    """A CoAP server that answers each GET with `respond(num, szx, count)` -> (payload, block2 tuple or None,
    etag, size2) and counts the payload bytes it sent. `manifest`: what `.../manifest` serves (properly)."""

    def __init__(self, respond: Callable, manifest: bytes = b"") -> None:
        self.respond = respond
        self.manifest = manifest
        self.sent = 0
        self.count = 0
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        req = Message.decode(data, addr)
        if req.code != Code.GET:
            return
        num, szx = (req.opt.block2.block_number, req.opt.block2.size_exponent) if req.opt.block2 else (0, 6)
        if req.opt.uri_path[-1:] == ("manifest",):
            payload, block, etag, size2 = proper(self.manifest, num, szx)
        else:
            self.count += 1
            payload, block, etag, size2 = self.respond(num, szx, self.count)
        resp = Message(mtype=Type.ACK, mid=req.mid, token=req.token, code=Code.CONTENT, payload=payload)
        if block is not None:
            resp.opt.block2 = BlockOption.BlockwiseTuple(*block)
        resp.opt.etag = etag
        if size2 is not None:
            resp.opt.size2 = size2
        self.sent += len(payload)
        self.transport.sendto(resp.encode(), addr)


def proper(content: bytes, num: int, szx: int):
    size = 1 << (szx + 4)
    chunk = content[num * size : (num + 1) * size]
    return chunk, (num, (num + 1) * size < len(content), szx), b"\x01\x02\x03\x04", len(content)


def case(content: bytes, name: str):
    """The responder of one hostile case, serving `content` (the signed model's bytes) otherwise properly."""

    def respond(num, szx, count):
        payload, block, etag, size2 = proper(content, num, szx)
        if name == "endless more":  # full blocks, always `more`, past the end
            return b"\xaa" * 1024, (num, True, szx), etag, None
        if name == "new ETag on every block":
            return payload, block, count.to_bytes(4, "big"), size2
        if name == "oversize block":
            return b"\xbb" * 1100, (num, True, szx), etag, size2
        if name == "short block with more":
            return payload[:100], (num, True, szx), etag, size2
        if name == "SZX grows mid-transfer":
            return (payload, block, etag, size2) if num == 0 else (content[1024:3072], (0, True, 7), etag, size2)
        if name == "12-byte ETag":
            return payload, block, b"E" * 12, size2
        if name == "Size2 of 10^12":
            return payload, block, etag, 10**12
        raise AssertionError(name)

    return respond


CASES = [
    "endless more",
    "new ETag on every block",
    "oversize block",
    "short block with more",
    "SZX grows mid-transfer",
    "12-byte ETag",
    "Size2 of 10^12",
]


def _left(folder: Path) -> list[str]:
    """Files under the agent's transfer folder (updates/, beside or in the board folder), but the MicroPython
    agent's empty `updates/.keep` (docs/ota.md)."""
    return sorted(str(p) for p in folder.rglob("*") if p.is_file() and "updates" in p.parts and p.name != ".keep")


async def _serve(proto: Hostile):
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: proto, local_addr=("127.0.0.1", 0))
    return transport, transport.get_extra_info("sockname")[1]


def test_a_server_breaking_a_transfer_bound_is_refused_and_leaves_nothing(agent, tmp_path) -> None:
    """Each hostile server in turn: `refused` (kind `transfer`, or `hash` for content past the signed size), the
    server sent at most the model's size and two blocks before the agent stopped asking, nothing is left in
    updates/, and v1 runs. Before, an endless `more` got 3 MB written for a 9.8 KB model and kept for resume,
    and a new ETag on every block restarted the download forever."""
    fmt = agent.model_format
    (v2,) = agent.publish(ModelStore(tmp_path / "store"), "npc-policy-int8-v2")
    content = (MODELS / f"npc-policy-int8-v2.{agent.model_ext}").read_bytes()

    async def body(s: AgentSession):
        agent.needs_coap_updates(s)
        got = []
        for name in CASES:
            proto = Hostile(case(content, name))
            transport, port = await _serve(proto)
            try:
                with pytest.raises(AgentError) as err:
                    await s.update(f"coap://127.0.0.1:{port}/models/npc-policy/{fmt}/2", v2, coap=COAP, timeout=60)
            finally:
                transport.close()
            got.append((name, err.value.code, s.faults[-1], proto.sent, _left(agent.folder)))
        return got, await s.hello()

    got, hello = agent.run(body, timeout=60)
    assert hello["model"]["version"] == 1
    for name, code, fault, sent, left in got:
        assert code == "refused" and fault["kind"] in ("transfer", "hash"), (name, fault)
        assert sent <= v2["size"] + 2 * 1100, (name, sent)
        assert left == [], (name, left)


DELTA_CASES = {
    "a 3 MB delta manifest": (
        json.dumps({"name": "npc-policy", "pad": "x" * 3_000_000}).encode(),
        ("transfer", "hash"),
    ),
    "a delta manifest that is a list": (b'["npc-policy", 1, 2]', ("parse",)),
    "a delta manifest nested 100 deep": (b'{"name":' + b"[" * 100 + b"]" * 100 + b"}", ("parse",)),
    "patch_size 1e30": (b'{"name":"npc-policy","patch_size":1e30,"patch_sha256":"' + b"0" * 64 + b'"}', ("parse",)),
    "patch_size of 400 digits": (b'{"name":"npc-policy","patch_size":' + b"9" * 400 + b"}", ("parse",)),
    "target a number": (b'{"name":"npc-policy","target":123456}', ("parse",)),
}


def test_a_hostile_delta_manifest_is_a_named_refusal(agent, tmp_path) -> None:
    """Before, a 3 MB delta manifest gave the MicroPython agent an `internal` MemoryError and left 3 MB in
    updates/, and one that was a JSON list got `internal` and no fault record."""
    fmt = agent.model_format
    (v2,) = agent.publish(ModelStore(tmp_path / "store"), "npc-policy-int8-v2")
    content = (MODELS / f"npc-policy-int8-v2.{agent.model_ext}").read_bytes()

    async def body(s: AgentSession):
        agent.needs_coap_updates(s)
        container = "delta-zlib" if "delta-bsdiff-zlib" in s.info["caps"] else "delta"
        got = []
        for name, (manifest, _) in DELTA_CASES.items():
            proto = Hostile(lambda num, szx, count: proper(content, num, szx), manifest)
            transport, port = await _serve(proto)
            url = f"coap://127.0.0.1:{port}/models/npc-policy/{fmt}/2/{container}/1"
            faults = len(s.faults)
            try:
                with pytest.raises(AgentError) as err:
                    await s.update(url, v2, delta=True, coap=COAP, timeout=60)
            finally:
                transport.close()
            got.append((name, err.value, s.faults[faults:], _left(agent.folder)))
        return got, await s.hello()

    got, hello = agent.run(body, timeout=60)
    assert hello["model"]["version"] == 1
    for name, err, faults, left in got:
        assert err.code == "refused" and len(faults) == 1, (name, err.reply, faults)
        assert faults[0]["kind"] in DELTA_CASES[name][1], (name, faults[0])
        assert left == [], (name, left)


def test_a_rolled_back_update_leaves_no_model_file(agent, tmp_path) -> None:
    """An update to a model that crashes in probation is rolled back, and its file is deleted from the models
    folder (before, the crash model stayed on flash after the nightly's fault stage)."""
    from bench.ota.server import UpdateServer

    store = ModelStore(tmp_path / "store")
    _, crash = agent.publish(store, "npc-policy-int8", agent.crash_model)

    async def body(s: AgentSession):
        agent.needs_coap_updates(s)
        async with UpdateServer(store) as srv:
            await s.update(srv.model_url("npc-policy", 2), crash, coap=COAP, timeout=60)
        fault = await s.next_fault(timeout=10)
        await asyncio.sleep(0.5)
        return fault, await s.hello()

    fault, hello = agent.run(body)
    assert fault["kind"] == "rollback" and hello["model"]["version"] == 1
    names = sorted(p.name for p in agent.models_dir.iterdir())
    assert not [n for n in names if n.startswith("npc-policy-2")], names


WS_CASES = {
    "endless chunks": lambda content: [{"size": len(content), "etag": "e1"}] + [b"\xaa" * 4096] * 64,
    "a size of 10^12": lambda content: [{"size": 10**12, "etag": "e1"}, content, {"done": True}],
    "a size that is a string": lambda content: [{"size": "9824", "etag": "e1"}, content, {"done": True}],
    "an ETag of 1000 characters": lambda content: [{"size": len(content), "etag": "e" * 1000}, content, {"done": True}],
    "more bytes than it announced": lambda content: [
        {"size": len(content), "etag": "e1"},
        content + b"\0" * 64,
        {"done": True},
    ],
}


def test_a_websocket_server_breaking_a_bound_is_refused(tmp_path) -> None:
    """The web agent's WebSocket channel: a server that sends past the signed size, announces a size over it or
    of another type, or an ETag of 1000 characters is refused (kind `hash` or `transfer`), and v1 runs."""
    import websockets
    from websockets.asyncio.server import serve

    from tests.conformance.harness import WebAgent

    agent = WebAgent(tmp_path / "agent")
    store = ModelStore(tmp_path / "store")
    (v2,) = agent.publish(store, "npc-policy-int8-v2")
    content = (MODELS / "npc-policy-int8-v2.tflite").read_bytes()
    state = {"case": None, "sent": 0}

    async def handler(conn) -> None:
        await conn.recv()  # {"offset": N}
        for part in WS_CASES[state["case"]](content):
            with contextlib.suppress(websockets.ConnectionClosed):
                if isinstance(part, bytes):
                    state["sent"] += len(part)
                    await conn.send(part)
                else:
                    await conn.send(json.dumps(part))

    async def body(s: AgentSession):
        got = []
        async with serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            for name in WS_CASES:
                state["case"], state["sent"] = name, 0
                with pytest.raises(AgentError) as err:
                    await s.update(f"ws://127.0.0.1:{port}/models/npc-policy/tflite-int8/2", v2, timeout=60)
                got.append((name, err.value.code, s.faults[-1]))
        return got, await s.hello()

    got, hello = agent.run(body, timeout=60)
    assert hello["model"]["version"] == 1
    for name, code, fault in got:
        assert code == "refused" and fault["kind"] in ("hash", "transfer"), (name, fault)

"""Hostile requests to the three update servers (issue 31, case 4): a file planted beside the store is never
served, whatever form the path takes (raw `..`, percent-encoded, double-encoded, backslashes, absolute), on
CoAP (aiocoap), gRPC and WebSocket; the store's own model still is."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import aiocoap
import grpc
import pytest
from aiocoap.numbers.codes import Code

from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.grpc_server import GrpcUpdateServer
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.ota.ws_server import WsUpdateServer
from tests.conformance.harness import MODELS
from tests.robustness.update_clients import grpc_fetch, ws_fetch

pytestmark = pytest.mark.e2e  # the real servers on loopback

PLANTED = b"PLANTED beside the store: never to be served\n"


def _store(tmp_path: Path) -> tuple[ModelStore, str]:
    """A store with one model, and a version folder `7` planted beside it (tmp_path/7, what `models/.././7`
    reaches from the store's root), which looks like a published version. Returns the store and the good path."""
    store = ModelStore(tmp_path / "store")
    store.publish(
        MODELS / "npc-policy-int8.tflite", load_private_key(DEV_PRIVATE_KEY), name="npc-policy", fmt="tflite-int8"
    )
    for planted in (tmp_path / "7", tmp_path / "store" / "npc-policy" / "7"):
        planted.mkdir(parents=True, exist_ok=True)
        (planted / "model.bin").write_bytes(PLANTED)
        sha = hashlib.sha256(PLANTED).hexdigest()
        (planted / "manifest.json").write_text(json.dumps({"sha256": sha, "size": len(PLANTED)}))
    return store, "models/npc-policy/tflite-int8/1"


def _forms(tmp_path: Path) -> list[str]:
    """Every traversal form, as a path string (each `/` a segment)."""
    outside = str(tmp_path)  # absolute: the planted folder's parent
    forms = [
        "models/.././7",
        "models/%2e%2e/%2e/7",
        "models/%2E%2E/%2E/7",
        "models/%252e%252e/%252e/7",
        "models\\..\\.\\7",
        "models/..\\./7",
        "models/..%2f.%2f7",
        "models/npc-policy/./7",  # the planted folder inside the store, not a FORMAT/VERSION
        "models/npc-policy/%2e/7",
        f"models/{outside}/7",
        f"models/{outside.lstrip('/')}/./7",
        f"{outside}/7",
        "/models/.././7",
        "models/.././+7",
    ]
    return forms + [f + "/manifest" for f in forms]


def _coap_paths(tmp_path: Path) -> list[tuple[str, ...]]:
    """The forms as CoAP Uri-Path options, plus options no URI parser would make: a segment with a slash,
    an absolute path as one segment, `..` with a backslash."""
    paths = [tuple(f.strip("/").split("/")) for f in _forms(tmp_path)]
    return [
        *paths,
        ("models", "../7"),
        ("models", "..", "./7"),
        ("models", str(tmp_path), ".", "7"),
        ("models", "..\\..", ".", "7"),
        ("models", "..", ".", "7", "manifest"),
        ("models", "npc-policy", "tflite-int8", "1", "..", "..", "..", "..", "7"),
    ]


def test_coap_server_serves_nothing_outside_the_store(tmp_path):
    store, good = _store(tmp_path)

    async def main() -> tuple[list, bytes]:
        async with UpdateServer(store) as srv:
            ctx = await aiocoap.Context.create_client_context()
            try:
                got = []
                for parts in _coap_paths(tmp_path):
                    msg = aiocoap.Message(code=Code.GET, uri=f"coap://127.0.0.1:{srv.port}")
                    msg.opt.uri_path = parts
                    resp = await asyncio.wait_for(ctx.request(msg).response, 10)
                    got.append((parts, resp.code, resp.payload))
                ok = await ctx.request(aiocoap.Message(code=Code.GET, uri=f"{srv.base_url}/{good}")).response
                return got, ok.payload
            finally:
                await ctx.shutdown()

    got, ok = asyncio.run(main())
    assert ok == (MODELS / "npc-policy-int8.tflite").read_bytes()  # the store still serves its own
    served = [(parts, code) for parts, code, payload in got if code.is_successful() or PLANTED in payload]
    assert not served
    assert {code for _, code, _ in got} == {Code.NOT_FOUND}


@pytest.mark.parametrize(
    ("server", "fetch", "served", "refusals"),
    [
        (GrpcUpdateServer, grpc_fetch, "OK", {grpc.StatusCode.NOT_FOUND}),
        (WsUpdateServer, ws_fetch, "done", None),  # an error message, or the connection closed
    ],
    ids=["grpc", "websocket"],
)
def test_grpc_and_websocket_servers_serve_nothing_outside_the_store(tmp_path, server, fetch, served, refusals):
    store, good = _store(tmp_path)

    async def main() -> tuple[list, bytes]:
        async with server(store) as srv:
            got = [(path, *await fetch(srv.port, path)) for path in _forms(tmp_path)]
            return got, (await fetch(srv.port, good))[1]

    got, ok = asyncio.run(main())
    assert ok == (MODELS / "npc-policy-int8.tflite").read_bytes()
    assert not [(path, end) for path, end, data in got if end == served or PLANTED in data]
    assert refusals is None or {end for _, end, _ in got} == refusals


def test_store_refuses_names_that_leave_it(tmp_path):
    store, _ = _store(tmp_path)
    from bench.core.errors import ConfigError

    for name, fmt in (("..", "."), (str(tmp_path), "."), ("npc-policy", ".."), ("a/../..", "x")):
        with pytest.raises(ConfigError):
            store.blob_path(name, 7, fmt)
    with pytest.raises(ConfigError):
        store.blob_path("npc-policy", -1, "tflite-int8")
    assert store.versions("..", ".") == [] and store.formats("..") == []

"""Malformed requests to the WebSocket update server (issue 31 case 9): `{"offset": 1e400}`, deeply nested JSON,
`true`, a negative offset and non-JSON each get one error reply, no traceback in the log, and the server still
serves the next, good request."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
import websockets

from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.store import ModelStore
from bench.ota.ws_server import WsUpdateServer

MODEL = Path(__file__).resolve().parents[2] / "fixtures/models/npc-policy-int8.tflite"
BAD = ['{"offset": 1e400}', "[" * 100_000 + "]" * 100_000, '{"offset": ' * 50_000 + "0" + "}" * 50_000,
       '{"offset": true}', '{"offset": -5}', "not json", '"offset"']  # fmt: skip


def test_bad_offsets_get_an_error_and_no_traceback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = ModelStore(tmp_path / "store")
    store.publish(MODEL, load_private_key(DEV_PRIVATE_KEY), name="npc-policy", fmt="tflite-int8")
    url_path = "/models/npc-policy/tflite-int8/1"

    async def ask(url: str, request: str) -> str | bytes:
        async with websockets.connect(url + url_path, max_size=None) as ws:
            await ws.send(request)
            return await asyncio.wait_for(ws.recv(), 10)

    async def main() -> tuple[list, str | bytes]:
        async with WsUpdateServer(store) as srv:
            url = f"ws://127.0.0.1:{srv.port}"
            replies = [await ask(url, request) for request in BAD]
            return replies, await ask(url, json.dumps({"offset": 0}))

    with caplog.at_level(logging.DEBUG):
        replies, good = asyncio.run(main())
    for request, reply in zip(BAD, replies, strict=True):
        assert "bad request" in json.loads(reply)["error"], (request[:40], reply)
    assert json.loads(good)["size"] == MODEL.stat().st_size
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]

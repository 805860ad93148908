"""A model store someone else tampered with, against the three update servers: a symbolic link or a FIFO as
a version's model or delta is never served nor waited on, a manifest nested 100,000 deep or of the wrong
shape is a named refusal, a version folder holding another version's manifest is refused by the listing,
`ota serve` stops on SIGTERM whatever was asked of it, and a CoAP token length of 9 is a Reset."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import aiocoap
import grpc
import pytest
from aiocoap.numbers.codes import Code

from bench.core.errors import ConfigError, ExitCode
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.grpc_server import GrpcUpdateServer
from bench.ota.resources import lookup
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.ota.ws_server import WsUpdateServer
from tests.conformance.harness import MODELS
from tests.conftest import REPO, hilbench
from tests.robustness.update_clients import grpc_fetch, ws_fetch

pytestmark = pytest.mark.e2e  # the real servers on loopback

SECRET = b"a file outside the store: never to be served\n"
V1 = "models/npc-policy/tflite-int8/1"
V2 = "models/npc-policy/tflite-int8/2"
DELTA = f"{V2}/delta/1"


def _store(tmp_path: Path) -> ModelStore:
    """Versions 1 and 2 of npc-policy (so a delta 1 -> 2), and a secret file beside the store."""
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    store.publish(MODELS / "npc-policy-int8.tflite", key, name="npc-policy", fmt="tflite-int8")
    store.publish(MODELS / "npc-policy-int8-v2.tflite", key, name="npc-policy", fmt="tflite-int8")
    (tmp_path / "secret").write_bytes(SECRET)
    return store


def _relink(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _tampered(tmp_path: Path, how: str) -> tuple[ModelStore, str]:
    """A store with one file replaced `how`; the path whose file it is."""
    store = _store(tmp_path)
    return store, _tamper(store, tmp_path, how)


def _tamper(store: ModelStore, tmp_path: Path, how: str) -> str:
    """Replace one file of `store` `how`; the path whose file it is."""
    v1, v2 = store.version_dir("npc-policy", 1), store.version_dir("npc-policy", 2)
    if how == "model link":
        _relink(v1 / "model.bin", tmp_path / "secret")
        return V1
    if how == "delta link":
        _relink(v2 / "delta-1.bsdiff", tmp_path / "secret")
        return DELTA
    if how == "manifest link":
        _relink(v1 / "manifest.json", tmp_path / "secret")
        return f"{V1}/manifest"
    if how == "model fifo":
        _fifo(v1 / "model.bin")
        return V1
    if how == "delta fifo":
        _fifo(v2 / "delta-1.bsdiff")
        return DELTA
    if how == "deep delta manifest":
        (v2 / "delta-1.json").write_text("[" * 100_000 + "]" * 100_000)
        return f"{DELTA}/manifest"
    if how == "delta manifest a list":
        (v2 / "delta-1.json").write_text("[1, 2]")
        return DELTA
    raise AssertionError(how)


HOW = ["model link", "delta link", "manifest link", "model fifo", "delta fifo", "deep delta manifest",
       "delta manifest a list"]  # fmt: skip


async def _coap(port: int, path: str) -> tuple[Code, bytes]:
    ctx = await aiocoap.Context.create_client_context()
    try:
        msg = aiocoap.Message(code=Code.GET, uri=f"coap://127.0.0.1:{port}/{path}")
        resp = await asyncio.wait_for(ctx.request(msg).response, 10)
        return resp.code, resp.payload
    finally:
        await ctx.shutdown()


@pytest.mark.parametrize("how", HOW)
def test_coap_serves_only_regular_files_inside_the_store(tmp_path: Path, how: str) -> None:
    """4.04 within seconds (a FIFO is never waited on), nothing of the secret, and the store's other version
    is still served."""
    store, path = _tampered(tmp_path, how)

    async def main() -> tuple[Code, bytes, bytes]:
        async with UpdateServer(store) as srv:
            code, payload = await _coap(srv.port, path)
            _, other = await _coap(srv.port, f"{V2}/manifest")
            return code, payload, other

    started = time.monotonic()
    code, payload, other = asyncio.run(main())
    assert code == Code.NOT_FOUND and SECRET not in payload
    assert json.loads(other)["version"] == 2
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("how", HOW)
def test_grpc_and_websocket_serve_only_regular_files_inside_the_store(tmp_path: Path, how: str) -> None:
    """The same for the gRPC (NOT_FOUND) and WebSocket (an error message) channels."""
    store, path = _tampered(tmp_path, how)

    async def fetch_from(server, fetch):
        async with server(store) as srv:
            return await fetch(srv.port, path)

    code, data = asyncio.run(asyncio.wait_for(fetch_from(GrpcUpdateServer, grpc_fetch), 30))
    assert code == grpc.StatusCode.NOT_FOUND and SECRET not in data
    end, data = asyncio.run(asyncio.wait_for(fetch_from(WsUpdateServer, ws_fetch), 30))
    assert end in ("error", "closed") and SECRET not in data


def test_deep_manifest_is_a_named_error(tmp_path: Path) -> None:
    """A delta manifest nested 100,000 deep: the store names it (no RecursionError), the lookup refuses it,
    and `ota serve` will not start on such a store (exit 2 naming the file)."""
    store, path = _tampered(tmp_path, "deep delta manifest")
    with pytest.raises(ConfigError, match="nested too deeply"):
        store.delta_manifest("npc-policy", 2, 1, "tflite-int8")
    assert lookup(store, path) is None
    run = subprocess.run(hilbench("ota", "serve", "--port", "0", "--store", str(store.root)), cwd=REPO,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode == ExitCode.USAGE and "delta-1.json is nested too deeply" in run.stderr, run.stderr


def test_version_folder_must_match_its_manifest(tmp_path: Path) -> None:
    """A version folder `9` holding a copy of version 1: the listing is exit 2 naming the folder, and no
    server serves it as version 9."""
    store = _store(tmp_path)
    planted = store.root / "npc-policy" / "tflite-int8" / "9"
    planted.mkdir()
    for name in ("model.bin", "manifest.json"):
        (planted / name).write_bytes((store.version_dir("npc-policy", 1) / name).read_bytes())
    run = subprocess.run(hilbench("model", "list", "--store", str(store.root)), cwd=REPO, capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == ExitCode.USAGE, run.stdout + run.stderr
    assert "npc-policy/tflite-int8/9 holds the manifest of 'npc-policy' 'tflite-int8' version 1" in run.stderr
    assert lookup(store, "models/npc-policy/tflite-int8/9") is None


def _serve(store: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(hilbench("ota", "serve", "--port", "0", "--json", "--store", str(store)), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    return proc, int(first["url"].rsplit(":", 1)[1].split("/")[0])


@pytest.mark.parametrize("how", ["model fifo", "deep delta manifest"])
def test_ota_serve_stops_on_sigterm_after_hostile_requests(tmp_path: Path, how: str) -> None:
    """`ota serve` asked for a FIFO or a 100,000-deep manifest put in its store after it started (three times):
    it answers, prints no traceback, and SIGTERM stops it with 143."""
    store = _store(tmp_path)
    proc, port = _serve(store.root)
    path = _tamper(store, tmp_path, how)
    try:
        for _ in range(3):
            code, _ = asyncio.run(_coap(port, path))
            assert code == Code.NOT_FOUND
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "RecursionError" not in err


def _options(parts: list[str]) -> bytes:
    out, previous = b"", 0
    for part in parts:
        data = part.encode()
        out += bytes((((11 - previous) << 4) | len(data),)) + data
        previous = 11
    return out


@pytest.mark.parametrize("tkl", [9, 12, 15])
def test_coap_token_length_over_8_is_reset(tmp_path: Path, tkl: int) -> None:
    """Token lengths 9-15 are a message format error (RFC 7252 3): a confirmable request gets a Reset with its
    message ID, never a 2.05 or a 4.04; a token of 8 is still served."""
    store = _store(tmp_path)

    async def main() -> dict[int, bytes]:
        async with UpdateServer(store) as srv:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.settimeout(5)
            got = {}
            for length in (8, tkl):
                data = bytes((0x40 | length, 0x01, 0x12, length)) + bytes(range(1, length + 1))
                sock.sendto(data + _options(["models", "npc-policy", "tflite-int8", "1", "manifest"]),
                            ("127.0.0.1", srv.port))  # fmt: skip
                got[length] = (await asyncio.get_running_loop().run_in_executor(None, sock.recvfrom, 2048))[0]
            sock.close()
            return got

    got = asyncio.run(main())
    assert got[8][0] == 0x68 and got[8][1] == 0x45  # ACK with the 8-byte token, 2.05 Content
    assert got[tkl] == bytes((0x70, 0x00, 0x12, tkl))  # RST, no token, code 0.00, the request's message ID

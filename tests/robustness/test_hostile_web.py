"""Hostile writes to a web device's storage (issue 31, case 2): the page server takes a PUT only from the
device's page (its token), only to the files the agent records, after resolving the path; the trust key is
never writable, and junk is refused. Requests go out raw (http.client sends the path as given, like
`curl --path-as-is`)."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import os
import random
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.browser.deploy import deploy_storage
from bench.browser.pages import TOKEN_HEADER, PageServer
from tests.conformance.harness import MODELS

MODEL = MODELS / "npc-policy-int8.tflite"
RECORD = json.dumps({"path": "npc-policy-int8.tflite", "manifest": {"name": "npc-policy", "version": 1}}).encode()


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


def _put(port: int, path: str, body: bytes, token: str | None, headers: dict | None = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("PUT", path, skip_host=False, skip_accept_encoding=True)
        for k, v in {**({TOKEN_HEADER: token} if token is not None else {}), **(headers or {})}.items():
            conn.putheader(k, v)
        if "Content-Length" not in (headers or {}):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


def _traversals(name: str) -> list[str]:
    base = f"/dev/{name}"
    key = "trusted.pub.pem"
    return [
        f"{base}/models/../{key}",
        f"{base}/models/%2e%2e/{key}",
        f"{base}/models/%2E%2E/{key}",
        f"{base}/models/%252e%252e/{key}",
        f"{base}/models/..%2f{key}",
        f"{base}/models/%2e%2e%2f{key}",
        f"{base}/models\\..\\{key}",
        f"{base}/models/..\\{key}",
        f"{base}/models/./../{key}",
        f"{base}/models/updates/../../{key}",
        f"{base}/{key}",
        f"{base}/agent.json",
        f"{base}//models/current.json",
        f"{base}/models//tmp/x.tflite",
        f"{base}/models/./current.json",
        f"{base}/models/current.json?x=1",
        f"/dev/%2e%2e/{name}/models/current.json",
        f"/dev/{name}%2fmodels/current.json",
        "/etc/passwd",
        f"http://127.0.0.1/dev/{name}/models/../{key}",
    ]


@pytest.fixture
def served(tmp_path):
    """A page server with two web devices' storage (a, b); yields (port, folders, page URLs)."""
    folders = {n: tmp_path / n for n in ("a", "b")}
    for folder in folders.values():
        deploy_storage(folder, MODEL)
    (tmp_path / "outside").mkdir()
    (folders["b"] / "models" / "updates").symlink_to(tmp_path / "outside")  # a link out of the store

    loop = asyncio.new_event_loop()
    pages = PageServer()
    loop.run_until_complete(pages.start())
    try:
        urls = {n: pages.add_device(n, f) for n, f in folders.items()}
        yield pages.http.server_address[1], folders, urls
    finally:
        loop.run_until_complete(pages.stop())
        loop.close()


def _token(url: str) -> str:
    frag = urlsplit(url).fragment
    assert frag.startswith("token=")
    return frag.removeprefix("token=")


def test_the_token_travels_in_the_fragment_only_and_differs_per_device(served):
    _, _, urls = served
    a, b = _token(urls["a"]), _token(urls["b"])
    assert len(a) >= 40 and a != b
    assert a not in urlsplit(urls["a"]).query and a not in urlsplit(urls["a"]).path


def test_traversal_and_encoded_forms_never_write_outside_the_models_folder(served, tmp_path):
    port, folders, urls = served
    token = _token(urls["a"])
    key_before = (folders["a"] / "trusted.pub.pem").read_bytes()
    before = _tree(tmp_path)
    pem = b"-----BEGIN PUBLIC KEY-----\nattacker\n-----END PUBLIC KEY-----\n"
    codes = {path: _put(port, path, pem, token) for path in _traversals("a")}
    codes |= {path + "#record": _put(port, path, RECORD, token) for path in _traversals("a")}
    assert all(code in (400, 403) for code in codes.values()), codes
    assert (folders["a"] / "trusted.pub.pem").read_bytes() == key_before
    assert _tree(tmp_path) == before


def test_a_write_needs_the_devices_own_token(served, tmp_path):
    port, folders, urls = served
    before = _tree(tmp_path)
    path = "/dev/a/models/current.json"
    assert _put(port, path, RECORD, None) == 403
    assert _put(port, path, RECORD, "") == 403
    assert _put(port, path, RECORD, _token(urls["a"])[:-1] + "x") == 403
    assert _put(port, path, RECORD, _token(urls["b"])) == 403  # device b's token does not write device a
    assert _tree(tmp_path) == before
    assert _put(port, path, RECORD, _token(urls["a"])) == 204  # what the agent does still works
    assert (folders["a"] / "models" / "current.json").read_bytes() == RECORD
    update = "/dev/a/models/updates/npc-policy-2.tflite"
    assert _put(port, update, MODEL.read_bytes(), _token(urls["a"])) == 204
    assert (folders["a"] / "models" / "updates" / "npc-policy-2.tflite").read_bytes() == MODEL.read_bytes()


def test_junk_puts_are_refused_and_change_nothing(served, tmp_path):
    port, _, urls = served
    token = _token(urls["a"])
    rng = random.Random(31)
    before = _tree(tmp_path)
    junk = [
        ("/dev/a/models/current.json", b"not json"),
        ("/dev/a/models/current.json", b"[1, 2]"),
        ("/dev/a/models/current.json", b'{"path": 1}'),
        ("/dev/a/models/updates/x.tflite", b"not a model at all"),
        ("/dev/a/models/updates/x.npcm", b"\0\0\0\0TFL3"),
        ("/dev/a/models/npc-policy-int8.tflite", MODEL.read_bytes()),  # the deployed model is not rewritten
        ("/dev/a/models/updates/sub/x.tflite", MODEL.read_bytes()),
        ("/dev/b/models/updates/x.tflite", MODEL.read_bytes()),  # b's updates/ links out of its storage
        ("/dev/nosuch/models/current.json", RECORD),
    ]
    for _ in range(20):
        name = "".join(rng.choice("abcxyz.-_%/\\") for _ in range(rng.randint(1, 12)))
        junk.append((f"/dev/a/models/{name}", rng.randbytes(rng.randint(1, 64))))
    tokens = {"a": token, "b": _token(urls["b"]), "nosuch": token}
    codes = [_put(port, p, body, tokens[p.split("/")[2]]) for p, body in junk]
    assert all(code in (400, 403) for code in codes), list(zip(junk, codes, strict=True))
    for length in ("-1", "abc", "", str(1 << 40)):  # never read to the end of the stream, never a hang
        code = _put(port, "/dev/a/models/current.json", RECORD, token, {"Content-Length": length})
        assert code in (400, 411, 413)
    assert _tree(tmp_path) == before
    assert not os.listdir(tmp_path / "outside")


def test_only_the_devices_page_opens_its_link(tmp_path):
    """Another local process cannot pose as device a's page on the bench's link (it would feed the bench
    frames and replies in the device's name): without a's token the link is closed at once."""
    import websockets

    deploy_storage(tmp_path / "a", MODEL)

    async def main() -> list:
        async with PageServer() as pages:
            url = pages.add_device("a", tmp_path / "a")
            link = f"{pages.ws_base}/agent/a"
            got = []
            for candidate in (link, f"{link}?token=", f"{link}?token=guess", f"{link}?token={_token(url)}x"):
                async with websockets.connect(candidate) as ws:
                    with pytest.raises(websockets.ConnectionClosed) as err:
                        await asyncio.wait_for(ws.recv(), 5)
                    got.append(err.value.rcvd.code if err.value.rcvd else None)
            assert pages.links["a"].empty()
            async with websockets.connect(f"{link}?token={_token(url)}"):
                accepted = await pages.accept("a", 5)  # the page's own link is taken
            await accepted.close()
            return got

    assert asyncio.run(main()) == [1008] * 4

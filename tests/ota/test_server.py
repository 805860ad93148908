"""The update server: random-access Block2 with Size2 and ETag; libcoap's coap-client as an independent peer."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import aiocoap
import pytest
from aiocoap.numbers.codes import Code
from aiocoap.optiontypes import BlockOption

from bench.ota.server import UpdateServer
from tests.requires import require_program


async def _get(ctx: aiocoap.Context, url: str, block: int | None) -> aiocoap.Message:
    msg = aiocoap.Message(code=Code.GET, uri=url)
    if block is not None:
        msg.opt.block2 = BlockOption.BlockwiseTuple(block, False, 6)
    return await ctx.request(msg, handle_blockwise=False).response


def test_any_block_first_with_size2_and_content_etag(two_versions) -> None:
    store, v1, _ = two_versions

    async def run() -> list[aiocoap.Message]:
        ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
        try:
            async with UpdateServer(store) as srv:
                url = srv.model_url("blob", 1)
                last = (len(v1) - 1) // 1024
                return [await _get(ctx, url, n) for n in (10, 0, last, last + 1)] + [
                    await _get(ctx, srv.model_url("blob", 9), 0)
                ]
        finally:
            await ctx.shutdown()

    b10, b0, blast, beyond, missing = asyncio.run(run())
    assert b10.code == Code.CONTENT and b10.payload == v1[10240:11264]  # a fresh client, block 10 first
    assert b10.opt.block2.more and b10.opt.size2 == len(v1)
    assert b10.opt.etag == b0.opt.etag == bytes.fromhex(hashlib.sha256(v1).hexdigest()[:16])
    assert not blast.opt.block2.more and blast.payload == v1[blast.opt.block2.start :]
    assert beyond.code == Code.BAD_OPTION
    assert missing.code == Code.NOT_FOUND


def test_manifest_resource_serves_the_signed_manifest(two_versions) -> None:
    store, _, _ = two_versions

    async def run() -> bytes:
        ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
        try:
            async with UpdateServer(store) as srv:
                return (
                    await ctx.request(
                        aiocoap.Message(code=Code.GET, uri=srv.model_url("blob", 2) + "/manifest")
                    ).response
                ).payload
        finally:
            await ctx.shutdown()

    assert json.loads(asyncio.run(run())) == store.manifest("blob", 2)


@pytest.mark.e2e
def test_libcoap_client_fetches_a_model_blockwise(two_versions, tmp_path: Path) -> None:
    client = require_program("coap-client")
    store, v1, v2 = two_versions

    async def run() -> tuple[int, int, int]:
        async with UpdateServer(store) as srv:
            codes = []
            for version in (1, 2):
                proc = await asyncio.create_subprocess_exec(
                    client, "-b", "1024", "-o", str(tmp_path / f"v{version}"), srv.model_url("blob", version)
                )
                codes.append(await asyncio.wait_for(proc.wait(), 30))
            return *codes, srv.served("blob/raw/1").total_blocks

    rc1, rc2, served = asyncio.run(run())
    assert (rc1, rc2) == (0, 0)
    assert (tmp_path / "v1").read_bytes() == v1 and (tmp_path / "v2").read_bytes() == v2
    assert served == -(-len(v1) // 1024)  # block-wise, each block once


def test_fast_path_answers_exactly_what_aiocoap_would(tmp_path):
    """The datagram fast path's bytes equal aiocoap's own encoding of the same piggybacked response, served
    blocks are counted the same, and what it does not handle is left to aiocoap."""
    import random

    import aiocoap
    from aiocoap.numbers.codes import Code
    from aiocoap.optiontypes import BlockOption

    from bench.models.signing import generate_key
    from bench.ota.server import ModelsResource, _fast_response, block_response
    from bench.ota.store import ModelStore

    data = random.Random(3).randbytes(5000)
    (tmp_path / "blob.bin").write_bytes(data)
    store = ModelStore(tmp_path / "store")
    store.publish(tmp_path / "blob.bin", generate_key(), name="blob", fmt="raw")
    models = ModelsResource(store)
    path = ("models", "blob", "raw", "1")
    for num, szx, token in ((0, 6, b""), (3, 6, b"\x01\x02\x03"), (4, 6, b"\xaa"), (9, 4, b"\x07" * 8)):
        for _repeat in range(2):  # the second time from the encoded cache
            request = aiocoap.Message(code=Code.GET, uri_path=path, transport_tuning=aiocoap.Reliable)
            request.mtype, request.mid, request.token = aiocoap.CON, 4242 + num, token
            request.opt.block2 = BlockOption.BlockwiseTuple(num, False, szx)
            want = block_response(models._lookup(path[1:]), request.opt.block2)
            want.mtype, want.mid, want.token = aiocoap.ACK, request.mid, token
            assert _fast_response(request.encode(), models) == want.encode()
    assert models.served["blob/raw/1"].total_blocks == 8
    assert models.served["blob/raw/1"].bytes == 2 * (1024 + 1024 + (5000 - 4096) + 256)  # szx 4: 256 B
    beyond = aiocoap.Message(code=Code.GET, uri_path=path, transport_tuning=aiocoap.Reliable)
    beyond.mtype, beyond.mid, beyond.opt.block2 = aiocoap.CON, 1, BlockOption.BlockwiseTuple(50, False, 6)
    assert _fast_response(beyond.encode(), models) is None  # 4.02: aiocoap renders the error
    post = aiocoap.Message(code=Code.POST, uri_path=path, transport_tuning=aiocoap.Reliable)
    post.mtype, post.mid = aiocoap.CON, 2
    assert _fast_response(post.encode(), models) is None

"""The host fetcher against the real update server through the impairment proxy: every fault has its
defined outcome (complete, resume, retry or refuse) and the running model file is never touched."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import aiocoap
import npc_update
import pytest

from bench.models.signing import DEV_PUBLIC_KEY, generate_key, load_public_key, sign_manifest, verify_manifest
from bench.ota.impair import Impairment, ImpairmentProxy
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore

TRUSTED = load_public_key(DEV_PUBLIC_KEY)
FAST_GIVE_UP = npc_update.Timing(ack_timeout=0.01, ack_random_factor=1.5, max_retransmit=3)


def blocks_of(n: int) -> int:
    return -(-n // 1024)


def run_update(
    store: ModelStore,
    workdir: Path,
    impairments: list[Impairment],
    *,
    version: int = 2,
    manifest: dict[str, Any] | None = None,
    delta: bool = False,
    current: Path | None = None,
    timing: npc_update.Timing | None = None,
    max_szx: int = 6,
) -> tuple[list[npc_update.UpdateResult | npc_update.UpdateFailed], UpdateServer, list[ImpairmentProxy]]:
    """One fetch_update per impairment (in order, same workdir: later ones resume earlier ones)."""
    manifest = manifest or store.manifest("blob", version)
    outcomes: list[npc_update.UpdateResult | npc_update.UpdateFailed] = []
    proxies: list[ImpairmentProxy] = []

    async def run() -> UpdateServer:
        ctx = await aiocoap.Context.create_client_context(transports=["udp6"])
        try:
            async with UpdateServer(store, max_szx=max_szx) as srv:
                for imp in impairments:
                    async with ImpairmentProxy(("127.0.0.1", srv.port), imp) as proxy:
                        proxies.append(proxy)
                        url = (
                            srv.delta_url("blob", version, version - 1, proxy.base_url)
                            if delta
                            else srv.model_url("blob", version, proxy.base_url)
                        )
                        try:
                            outcomes.append(
                                await npc_update.fetch_update(
                                    ctx,
                                    url,
                                    manifest,
                                    lambda m: verify_manifest(m, TRUSTED),
                                    workdir,
                                    delta=delta,
                                    current=current.read_bytes() if current else None,
                                    timing=timing,
                                    rng=random.Random(7),
                                )
                            )
                        except npc_update.UpdateFailed as exc:
                            outcomes.append(exc)
                return srv
        finally:
            await ctx.shutdown()

    return outcomes, asyncio.run(run()), proxies


@pytest.fixture
def running(tmp_path: Path, two_versions) -> Path:
    """The device's running model file (v1)."""
    path = tmp_path / "running.bin"
    path.write_bytes(two_versions[1])
    return path


def test_full_update_on_a_clean_link(two_versions, tmp_path: Path, running: Path) -> None:
    store, v1, v2 = two_versions
    (res,), _srv, (proxy,) = run_update(store, tmp_path / "w", [Impairment()], current=running)
    assert isinstance(res, npc_update.UpdateResult) and proxy.stats.dropped == 0
    assert res.path.read_bytes() == v2 and res.stats.blocks == blocks_of(len(v2)) and res.stats.bytes == len(v2)
    assert res.delta_saved == 0 and running.read_bytes() == v1


def test_server_with_smaller_blocks_is_followed(two_versions, tmp_path: Path, running: Path) -> None:
    store, _, v2 = two_versions
    (res,), srv, _ = run_update(store, tmp_path / "w", [Impairment()], current=running, max_szx=5)
    assert isinstance(res, npc_update.UpdateResult) and res.path.read_bytes() == v2
    served = srv.served("blob/raw/2")
    # every 512 B block was asked for (a retransmission on a loaded machine may repeat one; that is not the point)
    assert res.stats.blocks == -(-len(v2) // 512) == len(served.blocks)
    assert max(served.blocks) == res.stats.blocks - 1


def test_delta_update_transfers_only_the_patch(two_versions, tmp_path: Path, running: Path) -> None:
    store, _, v2 = two_versions
    (res,), srv, _ = run_update(store, tmp_path / "w", [Impairment()], delta=True, current=running)
    assert isinstance(res, npc_update.UpdateResult) and res.path.read_bytes() == v2
    patch_size = store.delta_manifest("blob", 2, 1)["patch_size"]
    assert patch_size < res.stats.bytes < patch_size + 1024  # the patch and its small signed manifest
    assert res.delta_saved == len(v2) - res.stats.bytes > len(v2) // 2
    assert srv.served("blob/raw/2").total_blocks == 0


@pytest.mark.parametrize(
    "impairment",
    [
        Impairment(loss=0.05, seed=3),
        Impairment(delay_ms=2, jitter_ms=2, seed=4),
        Impairment(duplicate=0.2, seed=5),
        Impairment(reorder=0.2, seed=6),
    ],
    ids=["loss5", "delay-jitter", "duplicate", "reorder"],
)
def test_impaired_link_completes_with_the_right_bytes(two_versions, tmp_path: Path, running: Path, impairment) -> None:
    store, v1, v2 = two_versions
    (res,), _, (proxy,) = run_update(store, tmp_path / "w", [impairment], current=running)
    assert isinstance(res, npc_update.UpdateResult) and res.path.read_bytes() == v2
    stats = proxy.stats
    assert stats.dropped + stats.delayed + stats.duplicated + stats.reordered > 0  # the impairment did act
    if impairment.loss:
        assert res.stats.retransmits >= 1
    assert running.read_bytes() == v1


def test_cut_transfer_resumes_resending_at_most_one_block(two_versions, tmp_path: Path, running: Path) -> None:
    store, v1, v2 = two_versions
    cut, resumed = run_update(
        store, tmp_path / "w", [Impairment(cut_at_block=20), Impairment()], current=running, timing=FAST_GIVE_UP
    )[0]
    assert isinstance(cut, npc_update.UpdateFailed) and cut.kind == "transfer" and "kept for resume" in str(cut)
    assert running.read_bytes() == v1  # the running model is untouched
    assert isinstance(resumed, npc_update.UpdateResult) and resumed.path.read_bytes() == v2
    assert resumed.stats.resumed_from == 20 and resumed.stats.blocks == blocks_of(len(v2)) - 20


def test_cut_resume_server_sends_at_most_one_block_twice(two_versions, tmp_path: Path, running: Path) -> None:
    store, _, v2 = two_versions
    (cut, resumed), srv, (cut_proxy, _) = run_update(
        store, tmp_path / "w", [Impairment(cut_at_block=20), Impairment()], current=running, timing=FAST_GIVE_UP
    )
    served = srv.served("blob/raw/2")
    # Requests sent into the cut never reach the server; any other retransmission (a slow answer on a
    # loaded machine) makes the server send that block again, and is counted by the client.
    spurious = cut.stats.retransmits - FAST_GIVE_UP.max_retransmit + resumed.stats.retransmits
    assert cut_proxy.stats.cut_dropped >= 1 + FAST_GIVE_UP.max_retransmit
    assert served.total_blocks <= blocks_of(len(v2)) + 1 + spurious
    assert served.blocks[20] <= 2 + spurious and all(served.blocks[n] >= 1 for n in range(blocks_of(len(v2))))


def test_corrupted_block_is_caught_by_the_hash_and_refetched(two_versions, tmp_path: Path, running: Path) -> None:
    store, _v1, v2 = two_versions
    (res,), _, (proxy,) = run_update(store, tmp_path / "w", [Impairment(corrupt_block=7)], current=running)
    assert proxy.stats.corrupted == 1
    assert isinstance(res, npc_update.UpdateResult) and res.path.read_bytes() == v2 and res.stats.restarts == 1


def test_truncated_blob_is_refused(two_versions, tmp_path: Path, running: Path) -> None:
    store, v1, v2 = two_versions
    blob = store.blob_path("blob", 2)
    blob.write_bytes(v2[: len(v2) // 2])
    (res,), _, _ = run_update(store, tmp_path / "w", [Impairment()], current=running)
    assert isinstance(res, npc_update.UpdateFailed) and res.kind == "hash"
    assert running.read_bytes() == v1 and not list((tmp_path / "w").glob("*.bin"))


def test_model_signed_by_another_key_is_refused_before_any_transfer(two_versions, tmp_path: Path, running) -> None:
    store, v1, _ = two_versions
    forged = sign_manifest(store.manifest("blob", 2), generate_key())
    (res,), srv, _ = run_update(store, tmp_path / "w", [Impairment()], manifest=forged, current=running)
    assert isinstance(res, npc_update.UpdateFailed) and res.kind == "signature"
    assert srv.served("blob/raw/2").total_blocks == 0 and running.read_bytes() == v1


def test_delta_against_the_wrong_base_is_refused(two_versions, tmp_path: Path) -> None:
    store, _, v2 = two_versions
    other = tmp_path / "other.bin"
    other.write_bytes(v2)  # the device runs something that is not the delta's base
    (res,), srv, _ = run_update(store, tmp_path / "w", [Impairment()], delta=True, current=other)
    assert isinstance(res, npc_update.UpdateFailed) and res.kind == "hash" and "base" in str(res)
    assert srv.served("blob/raw/2/delta/1").total_blocks == 0 and other.read_bytes() == v2

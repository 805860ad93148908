"""micropython/npccoap.py under the real MicroPython unix VM, against the bench's update server (and proxy)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from bench.core.loop_thread import LoopThread
from bench.core.programs import get_program
from bench.ota.impair import Impairment, ImpairmentProxy
from bench.ota.server import UpdateServer

REPO = Path(__file__).resolve().parents[2]
MICROPYTHON = get_program("micropython").find()
pytestmark = [pytest.mark.e2e, pytest.mark.programs("micropython")]

DRIVER = """
import json, sys, npccoap
url, path, sha, ack_ms, retr = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
limit = int(sys.argv[6])
client = npccoap.Client(npccoap.Timing(ack_ms, 1.5, retr))
try:
    print(json.dumps({"ok": True, "stats": client.fetch(url, path, sha or None, limit=limit)}))
except npccoap.FetchError as exc:
    print(json.dumps({"ok": False, "kind": exc.kind, "detail": str(exc)}))
client.close()
"""


def mp_fetch(
    tmp_path: Path, url: str, dest: Path, sha: str = "", ack_ms: int = 50, retransmits: int = 6, limit: int = 1 << 24
) -> dict:
    """Run the client in MicroPython (at most `limit` bytes); its JSON verdict."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "MICROPYPATH": f"{REPO / 'micropython'}:.frozen"}
    proc = subprocess.run(
        [MICROPYTHON, str(driver), url, str(dest), sha, str(ack_ms), str(retransmits), str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def served(two_versions):
    """The update server on a background loop, plus a way to put proxies in front of it."""
    store, _, v2 = two_versions
    loop = LoopThread()
    server = UpdateServer(store)
    loop.run(server.start())
    proxies: list[ImpairmentProxy] = []

    def proxy(imp: Impairment) -> ImpairmentProxy:
        p = ImpairmentProxy(("127.0.0.1", server.port), imp)
        loop.run(p.start())
        proxies.append(p)
        return p

    yield server, proxy, loop, v2, store.manifest("blob", 2)["sha256"]
    for p in proxies:
        loop.run(p.stop())
    loop.run(server.stop())
    loop.close()


def test_fetch_full_model_verifies_hash(served, tmp_path: Path) -> None:
    server, _, _, v2, sha = served
    res = mp_fetch(tmp_path, server.model_url("blob", 2), tmp_path / "m.bin", sha)
    assert res["ok"], res
    assert (tmp_path / "m.bin").read_bytes() == v2
    assert res["stats"]["blocks"] == -(-len(v2) // 1024) and res["stats"]["size"] == len(v2)
    assert not (tmp_path / "m.bin.part").exists()


def test_fetch_follows_a_server_with_smaller_blocks(two_versions, tmp_path: Path) -> None:
    store, _, v2 = two_versions
    loop = LoopThread()
    server = UpdateServer(store, max_szx=4)  # 256-byte blocks, as a constrained server might insist on
    loop.run(server.start())
    try:
        res = mp_fetch(tmp_path, server.model_url("blob", 2), tmp_path / "m.bin", store.manifest("blob", 2)["sha256"])
    finally:
        loop.run(server.stop())
        loop.close()
    assert res["ok"], res
    assert (tmp_path / "m.bin").read_bytes() == v2 and res["stats"]["blocks"] == -(-len(v2) // 256)


def test_fetch_through_loss_duplication_and_reordering(served, tmp_path: Path) -> None:
    server, proxy, _, v2, sha = served
    p = proxy(Impairment(loss=0.05, duplicate=0.1, reorder=0.1, seed=11))
    res = mp_fetch(tmp_path, server.model_url("blob", 2, p.base_url), tmp_path / "m.bin", sha)
    assert res["ok"], res
    assert (tmp_path / "m.bin").read_bytes() == v2 and res["stats"]["retransmits"] >= 1


def test_cut_then_resume_from_the_last_good_block(served, tmp_path: Path) -> None:
    server, proxy, loop, v2, sha = served
    p = proxy(Impairment(cut_at_block=30))
    cut = mp_fetch(tmp_path, server.model_url("blob", 2, p.base_url), tmp_path / "m.bin", sha, ack_ms=10, retransmits=3)
    assert not cut["ok"] and cut["kind"] == "transfer"
    assert (tmp_path / "m.bin.part").stat().st_size == 30 * 1024  # blocks 0..29 are on flash
    before = Counter(server.served("blob/raw/2").blocks)  # the cut fetch's (a retransmit under load repeats one)
    loop.loop.call_soon_threadsafe(p.restore)
    res = mp_fetch(tmp_path, server.model_url("blob", 2, p.base_url), tmp_path / "m.bin", sha)
    assert res["ok"] and res["stats"]["resumed_from"] == 30, res
    assert (tmp_path / "m.bin").read_bytes() == v2
    resumed = server.served("blob/raw/2").blocks - before  # what the resumed fetch was served
    assert min(resumed) == 30 and set(resumed) == set(range(30, -(-len(v2) // 1024))), sorted(resumed)


def test_corrupted_block_is_refetched_and_bad_content_refused(served, tmp_path: Path) -> None:
    server, proxy, _, v2, sha = served
    p = proxy(Impairment(corrupt_block=3))
    res = mp_fetch(tmp_path, server.model_url("blob", 2, p.base_url), tmp_path / "m.bin", sha)
    assert res["ok"] and res["stats"]["restarts"] == 1 and (tmp_path / "m.bin").read_bytes() == v2
    bad = mp_fetch(tmp_path, server.model_url("blob", 1), tmp_path / "other.bin", sha)  # v1 is not what sha names
    assert not bad["ok"] and bad["kind"] == "hash" and not (tmp_path / "other.bin").exists()

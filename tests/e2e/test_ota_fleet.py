"""One `update` across a mixed virtual fleet (ESP32-C6 with the MicroPython agent, Pi 5 with the host agent),
concurrently: each device gets the model in the format it runs, as a delta in the container its agent
applies (bsdiff4-zlib on MicroPython, bsdiff4 on the host)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from bench.agent.session import AgentSession, LoopStart
from bench.config.fleet import load_fleet
from bench.core.loop_thread import run_on_a_thread
from bench.devices import driver_for
from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
from bench.ota.impair import Impairment, ImpairmentProxy
from bench.ota.rollout import device_base_url, update_devices
from bench.ota.server import UpdateServer
from bench.ota.store import ModelStore
from bench.virtual import uplinks, virtual_fleet
from tests.conftest import REPO
from tests.linux_support import loopback

pytestmark = pytest.mark.e2e
MODELS = REPO / "fixtures" / "models"


@pytest.mark.slow  # opt-in (--run-slow): the nightly e2e's update stage sends each format by default
def test_fleet_update_sends_each_device_its_format(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    for stem in ("npc-policy-int8", "npc-policy-int8-v2"):
        store.publish(MODELS / f"{stem}.tflite", key, name="npc-policy", fmt="tflite-int8")
    v1 = MODELS / "npc-policy-int8.npcm"
    finetuned = bytearray(v1.read_bytes())  # the last layer's weights nudged by one step: what a fine-tune ships
    for i in range(len(finetuned) - 300, len(finetuned) - 50):
        finetuned[i] ^= 1
    (tmp_path / "npc-policy-int8-v2.npcm").write_bytes(finetuned)
    store.publish(v1, key, name="npc-policy", fmt="npcm-int8")
    v2_npcm = store.publish(tmp_path / "npc-policy-int8-v2.npcm", key, name="npc-policy", fmt="npcm-int8").manifest
    devices = [loopback(d) if d.os else d for d in load_fleet() if d.name in ("c6-a", "pi5-1")]

    async def run():
        async with virtual_fleet(devices) as (resolved, _):
            flashed = await asyncio.gather(*(driver_for(d).flash() for d in resolved))
            assert all(s.ok for steps in flashed for s in steps), flashed
            # agents start with what they ran last: back to v1, a downgrade when that was v2
            back = await update_devices(resolved, store, "npc-policy@1", allow_downgrade=True)
            assert all(r.ok for r in back), back
            return await update_devices(resolved, store, "npc-policy@2", want_delta=True)

    results = {r.device: r for r in run_on_a_thread(run(), timeout_s=600)}
    c6, pi = results["c6-a"], results["pi5-1"]
    assert c6.ok and pi.ok, (c6, pi)
    assert c6.running["sha256"] == v2_npcm["sha256"] and c6.running["version"] == 2 and c6.delta
    assert c6.bytes < v2_npcm["size"] // 2 and c6.delta_saved == v2_npcm["size"] - c6.bytes
    assert pi.running["format"] == "tflite-int8" and pi.running["version"] == 2 and pi.delta and pi.delta_saved > 0


def test_micropython_agent_cut_resume_loss_and_rollback(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    v1 = MODELS / "npc-policy-int8.npcm"
    (tmp_path / "v2.npcm").write_bytes(v1.read_bytes()[:-100] + bytes(100))  # last weights zeroed: still parses
    for path in (v1, tmp_path / "v2.npcm", MODELS / "npc-policy-large-int8.npcm"):  # v3 is over the memory limit
        store.publish(path, key, name="npc-policy", fmt="npcm-int8")
    (c6,) = [d for d in load_fleet() if d.name == "c6-b"]
    c6_fast = c6.with_settings(ota_timing="loopback")  # gives up on a cut fast

    async def run():
        # Each step on a freshly started board (its flash kept in the state folder): the partial download
        # written before the cut survives the reboot, and the next update resumes from it.
        async with virtual_fleet([c6]) as (resolved, _):
            steps = await driver_for(resolved[0]).flash()
            assert all(s.ok for s in steps), steps
            # whatever an earlier run left
            (back,) = await update_devices(resolved, store, "npc-policy@1", allow_downgrade=True)
        async with virtual_fleet([c6_fast]) as (resolved, _):
            (cut,) = await update_devices(resolved, store, "npc-policy@2", impairment=Impairment(cut_at_block=3))
        async with virtual_fleet([c6]) as (resolved, _):
            (lossy,) = await update_devices(resolved, store, "npc-policy@2", impairment=Impairment(loss=0.05, seed=9))
        async with virtual_fleet([c6]) as (resolved, _):
            (oom,) = await update_devices(resolved, store, "npc-policy@3")
        return back, cut, lossy, oom

    back, cut, lossy, oom = run_on_a_thread(run(), timeout_s=600)
    assert back.ok and back.running["version"] == 1
    assert not cut.ok and cut.kept_previous and "transfer" in cut.detail and cut.running["version"] == 1
    total = -(-store.manifest("npc-policy", 2)["size"] // 1024)
    assert lossy.ok and lossy.running["version"] == 2 and lossy.resumed_from == 3 and lossy.blocks == total - 3
    # a model over the memory limit is rolled back after its switch, or refused when it does not even parse in
    # the heap (the agent's own footprint decides which): either way the running model is kept
    assert not oom.ok and oom.kept_previous and oom.running["version"] == 2
    assert "rolled back" in oom.detail or "refused: oom" in oom.detail, oom.detail


def test_micropython_frames_go_on_while_an_update_downloads(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    key = load_private_key(DEV_PRIVATE_KEY)
    v1 = MODELS / "npc-policy-int8.npcm"
    (tmp_path / "v2.npcm").write_bytes(v1.read_bytes()[:-100] + bytes(100))
    store.publish(v1, key, name="npc-policy", fmt="npcm-int8")
    v2 = store.publish(tmp_path / "v2.npcm", key, name="npc-policy", fmt="npcm-int8").manifest
    (c6,) = [d for d in load_fleet() if d.name == "c6-a"]

    async def run():
        async with virtual_fleet([c6]) as (resolved, _):
            steps = await driver_for(resolved[0]).flash()
            assert all(s.ok for s in steps), steps
            driver = driver_for(resolved[0])
            session = await AgentSession.open(await driver.open_agent(), device=c6.name)
            try:
                # 40 ms each way: each of the 7 blocks takes 80 ms, the whole download about 0.6 s
                async with (
                    UpdateServer(store) as server,
                    ImpairmentProxy(("127.0.0.1", server.port), Impairment(delay_ms=40)) as proxy,
                ):
                    uplinks.grant(c6.name, proxy.port)  # as channel_url grants a served channel's port
                    await session.start(LoopStart(fps=20, vsync_hz=20))
                    t0 = time.monotonic_ns()
                    reply = await session.update(
                        server.model_url("npc-policy", 2, device_base_url(proxy.port, c6.settings.ota_server_host)),
                        v2,
                        coap={"ack_timeout_ms": 1000},
                    )
                    t1 = time.monotonic_ns()
                    await session.stop()
                frames = [f async for f in session.frames(timeout=10)]
            finally:
                await session.close()
                await driver.close_agent()
        return reply, frames, t0, t1

    reply, frames, t0, t1 = run_on_a_thread(run(), timeout_s=300)
    assert reply["t"] == "updated" and reply["model"]["sha256"] == v2["sha256"] and reply["blocks"] == 7
    during = [f for f in frames if t0 <= f.rx_ns <= t1]
    assert (t1 - t0) / 1e9 > 0.5  # the download really took a while
    assert len(during) >= 5 and during[0].rx_ns - t0 < 1.5e9, (len(during), (during[0].rx_ns - t0) / 1e6)
    # the frame loop goes on through the download, judged on the board's own (counted) clock, as the chip would
    # run it: a busy host stretches the bench's view of it more (20 FPS: inferences 50 ms apart). The download is
    # the reply's `transfer_us` before the last frame of the update. Before it the agent checks the manifest's
    # P-256 signature in MicroPython, which holds its loop (as the chip would), and frames made before the request
    # reached the board may arrive after the bench sent it.
    starts = [f.t0 for f in during if f.ran and f.t0 is not None]
    fetching = [t for t in starts if t >= starts[-1] - reply["transfer_us"]]
    gaps = [b - a for a, b in itertools.pairwise(fetching)]
    # a loop held through the download (or a third of it) would show a gap as long; a busy host, which starves the
    # board's emulator (nice 19) while it waits for a block, lengthens both the gaps and the download on its clock
    assert len(fetching) >= 5 and max(gaps) < reply["transfer_us"] / 3, (len(fetching), max(gaps), reply)

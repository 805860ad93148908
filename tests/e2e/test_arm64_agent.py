"""The host agent on the booted switch-arm64 image: hello, the frame loop on the int8 model, replayed
inputs. One guest (icount timing, as in the bundled fleet) is booted for the whole module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.agent.session import AgentSession, LoopStart
from bench.bundles.fingerprint import configured_model_sha256
from bench.config.fleet import load_fleet
from bench.devices.qemu_arm64 import QemuArm64Driver
from bench.image.build import build_image
from tests.conftest import alive
from tests.e2e.test_arm64 import my_qemus

pytestmark = pytest.mark.e2e


class Guest:
    """A booted guest with an open agent session, driven from one event loop."""

    def __init__(self, log_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.driver = QemuArm64Driver(load_fleet().get("switch-1"), log_dir)
        self.session: AgentSession | None = None

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    async def open(self) -> None:
        transport = await self.driver.open_agent()
        self.session = await AgentSession.open(transport, device="switch-1", hello_timeout=60.0)

    async def close(self) -> dict[str, str]:
        try:
            if self.session is not None:
                await self.session.shutdown(timeout=30.0)
                await self.session.close()
            return await self.driver.machine.wait_for("agent-exit", 60.0)
        finally:
            await self.driver.close_agent()


@pytest.fixture(scope="module")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    build_image("switch-arm64")
    g = Guest(tmp_path_factory.mktemp("switch-1"))
    try:
        g.run(g.open())
        yield g
        exit_ = g.run(g.close())
        assert exit_["rc"] == "0" and exit_["oom_kill"] == "0", exit_
    finally:
        g.driver.machine and g.driver.machine.kill()
        g.loop.close()
        assert g.driver.machine is None or not alive(g.driver.machine.pid)
        assert my_qemus() == []


def test_hello_reports_the_arm64_runtime_and_int8_model(guest: Guest) -> None:
    info = guest.session.info
    assert info["platform"] == "linux-aarch64/qemu-icount"  # the timing mode travels with every figure
    assert info["runtime"] == "tflite-runtime 2.14.0"
    assert info["model"]["format"] == "tflite-int8" and info["model"]["name"] == "npc-policy"
    assert info["model"]["sha256"] == configured_model_sha256(guest.driver.device)  # the factory model, as built
    assert guest.driver.timing == "icount" and guest.driver.platform()["cpu"] == "cortex-a57"
    assert guest.driver.boot_s is not None and guest.driver.boot_s > 0


def test_frame_loop_runs_the_int8_model(guest: Guest) -> None:
    async def run() -> list:
        await guest.session.start(LoopStart(fps=30, vsync_hz=60, frames=30))
        return [r async for r in guest.session.frames(timeout=60.0)]

    records = guest.run(run())
    assert [r.i for r in records] == list(range(records[0].i, records[0].i + 30))
    ran = [r for r in records if r.ran]
    assert ran and all(r.infer_us > 0 and r.model == 1 and 0 <= r.act < 8 for r in ran)


def test_replayed_inputs_reach_the_features(guest: Guest) -> None:
    async def run() -> tuple[int, list]:
        last = -1
        for k in range(20):
            last = await guest.session.send_input("gaze", [0.1 * (k % 10), 0.5, 0.9], ts=1000 + k * 8.3)
        await guest.session.start(LoopStart(fps=30, vsync_hz=60, frames=10))
        return last, [r async for r in guest.session.frames(timeout=60.0)]

    last, records = guest.run(run())
    assert max(r.seq for r in records) == last


def test_replay_of_a_session_into_the_guest_is_measured(guest: Guest, tmp_path: Path) -> None:
    """A recorded-style session (all channels, original timestamps) played by the bench's replayer into
    the agent in the guest; every input arrives and the run is measured and stored."""
    from bench.agent import wire
    from bench.agent.endpoint import AgentEndpoint
    from bench.replay.plan import build_plan
    from bench.replay.run import ReplayRun
    from bench.replay.synth import synth_session
    from bench.store.results import open_store

    plan = build_plan(synth_session("combat", 3, duration_s=2.0), wire.encode)
    device = guest.driver.device

    async def open_agent(dev) -> AgentEndpoint:
        async def keep_open() -> None:  # the module's guest stays up for the other tests
            return None

        return AgentEndpoint(guest.session, keep_open)

    async def run():
        before = (await guest.session.stats())["inputs"]
        runs = await ReplayRun(plan, [device], open_agent, store, run_id, speed=1.0).execute()
        return before, runs, (await guest.session.stats())["inputs"]

    store = open_store(tmp_path / "results.sqlite")
    run_id = store.runs.begin_run("replay", session=plan.session_id, speed=1.0)
    before, runs, after = guest.run(run())
    assert runs[0].status == "ok", runs[0].detail
    # icount: replayed on the guest's clock (the agent holds the inputs), as much of the session as fit its budget
    assert runs[0].latency_clock == "device" and after - before == runs[0].track.sent > 10
    assert max(f.seq for f in runs[0].frames) > 0
    ms = {m.name: m for m in store.measures.measurements(run_id, device.name)}
    assert 0 < ms["replay_covered"].value <= ms["replay_session"].value
    assert "device clock" in ms["decision_latency_p50"].description and ms["decision_latency_p50"].value > 0
    assert ms["frames"].value >= 0.95 * ms["frames_scheduled"].value  # not flooded: it kept its schedule
    assert ms["replay_release_error_p99"].value is not None and ms["first_frame_p50"].samples == 10


def test_ota_delta_update_switches_the_guest_model(guest: Guest, tmp_path: Path) -> None:
    """A hot model update as on the other Linux targets: the agent in the guest fetches the bsdiff delta
    v1 -> v2 block-wise from the bench's CoAP server at 10.0.2.2, verifies the signature and switches.
    (Last in this module: the guest runs v2 afterwards.)"""
    from bench.models.signing import DEV_PRIVATE_KEY, load_private_key
    from bench.ota.rollout import device_base_url, update_device
    from bench.ota.server import UpdateServer
    from bench.ota.store import ModelStore
    from bench.ota.timing import LAN

    key = load_private_key(DEV_PRIVATE_KEY)
    store = ModelStore(tmp_path / "store")
    models = Path(__file__).resolve().parent.parent.parent / "fixtures" / "models"
    store.publish(models / "npc-policy-int8.tflite", key, name="npc-policy", fmt="tflite-int8")
    target = store.publish(models / "npc-policy-int8-v2.tflite", key, name="npc-policy", fmt="tflite-int8").manifest

    async def run():
        async with UpdateServer(store) as server:
            base_url = device_base_url(server.port, guest.driver.host_address)
            result = await update_device(guest.session, store, target, base_url, timing=LAN, want_delta=True)
        await guest.session.start(LoopStart(fps=30, vsync_hz=60, frames=10))
        return result, [r async for r in guest.session.frames(timeout=60.0)]

    result, records = guest.run(run())
    assert result.ok, (result.detail, result.notes)
    assert result.delta and result.running["version"] == 2 and result.previous["version"] == 1
    assert result.blocks >= 1 and result.bytes < target["size"]  # the delta is smaller than the model
    assert {r.model for r in records if r.ran} == {2}

"""A fixture session replayed into a virtual Jetson and a virtual Pi 5 at once, through real sshd and the
real host agent: frames and latencies stored, board telemetry stored with the run and shown in the report."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.agent import wire
from bench.config.fleet import Device, load_fleet
from bench.core.loop_thread import run_on_a_thread
from bench.core.steps import StepResult
from bench.devices import driver_for
from bench.devices.held import HeldDrivers
from bench.recovery.linux_endpoint import LinuxAgentOpener
from bench.replay.plan import Plan, build_plan
from bench.replay.recording import read_session
from bench.replay.run import DeviceRun, ReplayRun
from bench.report.build import build_report
from bench.report.html import render_html
from bench.report.view_adapter import load_run
from bench.store.results import ResultStore, open_store
from bench.virtual import VirtualDevice, virtual_fleet
from tests.conftest import REPO
from tests.linux_support import loopback

pytestmark = pytest.mark.e2e

SECONDS = 3


def first_seconds(plan: Plan, seconds: float) -> Plan:
    limit = int(seconds * 1e9)
    return dataclasses.replace(plan, inputs=[p for p in plan.inputs if p.offset_ns < limit], duration_ns=limit)


def begin_replay(tmp_path: Path, session: str, kinds: tuple[str, ...]) -> tuple[Plan, list[Device], ResultStore, int]:
    """The first SECONDS of fixture `session`, the bundled fleet's devices of `kinds` on loopback, a fresh
    results store and the replay run begun in it."""
    plan = first_seconds(build_plan(read_session(REPO / f"fixtures/sessions/{session}.mcap"), wire.encode), SECONDS)
    devices = [loopback(d) for d in load_fleet() if d.kind in kinds]
    store = open_store(tmp_path / "results.sqlite")
    return plan, devices, store, store.runs.begin_run("replay", session=plan.session_id, speed=1.0)


async def flash(device: Device) -> list[StepResult]:
    """Flash `device` (deploy its agent) and close the driver."""
    driver = driver_for(device)
    try:
        return await driver.flash()
    finally:
        await driver.close()


async def frames_flowing(store, run_id: int, device: str, count: int = 20) -> None:
    """Wait until the replay run has stored `count` frames of `device` (the run is under way)."""
    for _ in range(600):
        if store.frames.frame_count(run_id, device) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{device}: no frames stored")


def replay_with_fault(
    plan: Plan,
    devices: list[Device],
    store: ResultStore,
    run_id: int,
    fault: Callable[[dict[str, VirtualDevice], LinuxAgentOpener], None],
) -> tuple[list[DeviceRun], LinuxAgentOpener]:
    """Replay `plan` into the one virtual device in `devices` (flashed first) and, once its frames flow, call
    `fault` with the running stand-ins and the agent opener; the replay's runs and the opener."""

    async def go() -> tuple[list[DeviceRun], LinuxAgentOpener]:
        async with virtual_fleet(devices) as (resolved, running):
            await flash(resolved[0])
            opener = LinuxAgentOpener(store, run_id)
            replay = asyncio.create_task(ReplayRun(plan, resolved, opener.open, store, run_id, speed=1.0).execute())
            await frames_flowing(store, run_id, resolved[0].name)
            fault(running, opener)
            return await replay, opener

    return run_on_a_thread(go(), timeout_s=180)


def test_replay_combat_session_into_jetson_and_pi(tmp_path: Path) -> None:
    plan, devices, store, run_id = begin_replay(tmp_path, "combat", ("jetson-orin-nx", "pi5"))

    async def go():
        async with virtual_fleet(devices) as (resolved, _running):
            for dev in resolved:
                assert all(step.ok for step in await flash(dev))
            opener = LinuxAgentOpener(store, run_id)
            runs = await ReplayRun(plan, resolved, opener.open, store, run_id, speed=1.0).execute()
            return runs, opener

    runs, opener = run_on_a_thread(go(), timeout_s=180)
    store.runs.finish_run(run_id, "finished")
    assert {r.device.name: r.status for r in runs} == {"orin-1": "ok", "pi5-1": "ok"}, [r.detail for r in runs]

    view = load_run(store, run_id)
    for name, fps in (("orin-1", 60), ("pi5-1", 30)):
        device = view.devices[name]
        assert store.frames.frame_count(run_id, name) >= fps * SECONDS * 0.6
        assert device.series("latency_ms") is not None and len(device.series("latency_ms")) > 50
        assert opener.errors[name] == []
        temps = device.telemetry["temp_c"]
        assert temps.unit == "degC" and temps.values.size >= 3 and (temps.values > 30).all()
        assert device.telemetry["mem_used_mb"].values.size == temps.values.size
        assert temps.t_s[-1] > 1.0  # sampled across the run, on the run's time axis
    assert "throttled_bits" in view.devices["pi5-1"].telemetry
    assert "power_vdd_in_mw" in view.devices["orin-1"].telemetry

    html = render_html(build_report(view))
    assert html.count("<title>Board temperature (hottest zone)</title>") == 2 and "Board telemetry" in html
    store.close()


def test_agent_killed_mid_replay_is_restarted_and_the_run_kept(tmp_path: Path) -> None:
    plan, devices, store, run_id = begin_replay(tmp_path, "dialogue", ("pi5",))

    def kill_agent(_running: dict[str, VirtualDevice], opener: LinuxAgentOpener) -> None:
        os.kill(opener.drivers["pi5-1"].agent.pid, signal.SIGKILL)  # as the OOM killer would

    runs, _opener = replay_with_fault(plan, devices, store, run_id, kill_agent)
    assert runs[0].status == "ok", runs[0].detail
    frames = list(store.frames.frames(run_id, "pi5-1"))
    indices = [f.i for f in frames]
    assert indices == sorted(set(indices)) and len(frames) >= 60 * SECONDS * 0.5
    faults = [f for _, f in store.measures.faults(run_id, "pi5-1") if f.cause == "bench"]
    assert [f.kind for f in faults] == ["agent-exit", "agent-restarted"]
    kill_ns = faults[0].t_fault_bench_ns
    assert any(f.rx_ns < kill_ns for f in frames) and any(f.rx_ns > kill_ns for f in frames)
    view = load_run(store, run_id)
    assert len(view.devices["pi5-1"].series("latency_ms")) > 20
    assert {f.kind for f in view.devices["pi5-1"].faults} >= {"agent-exit", "agent-restarted"}
    assert store.runs.devices(run_id)[0].info["agent_restarts"] == 1
    store.close()


def test_ssh_cut_mid_replay_reconnects_and_the_run_is_kept(tmp_path: Path) -> None:
    plan, devices, store, run_id = begin_replay(tmp_path, "exploration", ("jetson-orin-nx",))

    def cut_ssh(running: dict[str, VirtualDevice], _opener: LinuxAgentOpener) -> None:
        assert running["orin-1"].drop_connections() >= 1

    runs, opener = replay_with_fault(plan, devices, store, run_id, cut_ssh)
    assert runs[0].status == "ok", runs[0].detail
    kinds = [f.kind for _, f in store.measures.faults(run_id, "orin-1") if f.cause == "bench"]
    assert {"ssh-dropped", "ssh-reconnected", "agent-link-lost"} <= set(kinds) and "agent-exit" not in kinds
    frames = list(store.frames.frames(run_id, "orin-1"))
    assert len(frames) >= 60 * SECONDS * 0.5 and [f.i for f in frames] == sorted({f.i for f in frames})
    samples = opener.samples["orin-1"]
    assert samples and samples[-1].t_ns > max(f.t_fault_bench_ns for _, f in store.measures.faults(run_id, "orin-1"))
    store.close()


def _running(pid: int) -> bool:
    """Whether host process `pid` runs (the loopback board's agent is a host process); a zombie is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_held_drivers_start_a_fresh_agent_per_run_keep_the_last_and_stop_it_at_the_end(tmp_path: Path) -> None:
    plan, devices, store, first_run = begin_replay(tmp_path, "combat", ("pi5",))
    second_run = store.runs.begin_run("replay", session=plan.session_id, speed=1.0)

    async def go() -> tuple[list[DeviceRun], list[int]]:
        async with virtual_fleet(devices) as (resolved, _running_devices):
            await flash(resolved[0])
            held = HeldDrivers()
            runs, pids = [], []
            try:
                for run_id in (first_run, second_run):
                    opener = LinuxAgentOpener(store, run_id, held=held)
                    runs += await ReplayRun(plan, resolved, opener.open, store, run_id, speed=1.0).execute()
                    agent = opener.drivers["pi5-1"].agent
                    assert agent is not None and _running(agent.pid), "the held agent was stopped with its run"
                    pids.append(agent.pid)
                assert not _running(pids[0]), "the first run's agent still runs beside the second's"
                later = await held.driver(resolved[0])  # a stage after the replay (an update) reaches the last agent
                await later.open_agent()
                assert later.agent is not None and later.agent.pid == pids[1]
                await later.release_agent()
            finally:
                await held.close()
            assert not _running(pids[1]), "the held agent still runs after the drivers were closed"
            return runs, pids

    runs, pids = run_on_a_thread(go(), timeout_s=180)
    assert [r.status for r in runs] == ["ok", "ok"], [r.detail for r in runs]
    assert pids[0] != pids[1]  # each run measured an agent of its own
    for run_id in (first_run, second_run):
        assert store.frames.frame_count(run_id, "pi5-1") >= 30 * SECONDS * 0.6
    store.close()

"""The full Linux-board flow through real sshd and the real host agent (ai-edge-litert): deploy, start,
hello, a short frame run, stop; and the run-time faults: agent killed, SSH connection cut."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from bench.agent.session import AgentSession
from bench.core.reaper import processes_in
from bench.devices import driver_for
from bench.devices.linux import LinuxDriver
from bench.recovery.supervised import run_frames
from tests.linux_support import LINUX_KINDS, RunningBoard, virtual_board

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=LINUX_KINDS)
def board(request: pytest.FixtureRequest) -> Iterator[RunningBoard]:
    with virtual_board(request.param) as running:
        yield running


def test_deploy_start_hello_run_stop(board: RunningBoard) -> None:
    driver = driver_for(board.device)
    assert isinstance(driver, LinuxDriver)
    model = board.device.settings.model

    async def go():
        try:
            first = await driver.flash()
            again = await driver.flash()
            session = await AgentSession.open(await driver.open_agent(), device=board.device.name)
            await session.sync_clock(8)
            await session.start(fps=board.device.settings.fps_target, vsync_hz=60, frames=20)
            frames = [rec async for rec in session.frames(timeout=5)]
            stats = await session.stats()
            await session.close()
            await driver.close_agent()
            return first, again, session.info, frames, stats, driver.stopped_by
        finally:
            await driver.close()

    first, again, hello, frames, stats, stopped_by = board.loop.run(go(), timeout_s=120)
    assert [s.step for s in first] == ["connect", "runtime", "deploy"] and all(s.ok for s in first)
    assert first[2].figures["files_sent"] > 5 and not first[2].skipped
    assert again[2].skipped and again[2].figures["bytes_sent"] == 0
    assert hello["proto"] == 1 and hello["runtime"] == "ai-edge-litert 2.3.0"
    assert hello["model"]["name"] == model.replace("-int8", "")
    assert [f.i for f in frames] == list(range(20)) and all(f.ran and f.t1 > f.t0 for f in frames)
    assert stats["frames"] == 20
    assert stopped_by == "shutdown" and processes_in(board.virtual.root) == []


def test_agent_killed_mid_run_is_restarted_and_frames_kept(board: RunningBoard) -> None:
    driver = driver_for(board.device)
    killed: list[int] = []

    async def kill_once(session: AgentSession) -> None:
        if killed:
            return
        await asyncio.sleep(0.6)  # the frame loop (30 fps) has sent some frames by now
        killed.append(driver.agent.pid)
        os.kill(driver.agent.pid, signal.SIGKILL)  # as the OOM killer would

    async def go():
        try:
            await driver.flash()
            return await run_frames(driver, frames=60, fps=30, vsync_hz=60, feeder=kill_once)
        finally:
            await driver.close()

    run = board.loop.run(go(), timeout_s=120)
    assert run.complete and run.error is None
    assert len(run.segments) == 2 and run.segments[0].agent_pid == killed[0] != run.segments[1].agent_pid
    assert 0 < len(run.segments[0].frames) < 60
    assert len(run.frames) == 60
    kinds = [f.kind for f in run.faults]
    assert kinds == ["agent-exit", "agent-restarted"]
    assert "agent exited during the run" in run.faults[0].detail


def test_ssh_cut_mid_run_reconnects_and_the_agent_carries_on(board: RunningBoard) -> None:
    driver = driver_for(board.device)
    cuts: list[int] = []

    async def cut_once(session: AgentSession) -> None:
        if cuts:
            return
        await asyncio.sleep(0.6)
        cuts.append(board.virtual.drop_connections())

    async def go():
        try:
            await driver.flash()
            run = await run_frames(driver, frames=60, fps=30, vsync_hz=60, feeder=cut_once)
            return run, driver.agent.pid
        finally:
            await driver.close()

    run, pid_after = board.loop.run(go(), timeout_s=120)
    assert cuts and cuts[0] >= 1
    assert run.complete and len(run.frames) == 60
    assert len(run.segments) == 2 and run.segments[0].agent_pid == run.segments[1].agent_pid == pid_after
    kinds = [f.kind for f in run.faults]
    assert {"ssh-dropped", "ssh-reconnected", "agent-link-lost"} <= set(kinds) and "agent-exit" not in kinds

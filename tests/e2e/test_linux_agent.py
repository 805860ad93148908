"""The full Linux-board flow through real sshd and the real host agent (ai-edge-litert): deploy, start,
hello, a short frame run, stop; and the run-time faults: agent killed, SSH connection cut."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import pytest

from bench.agent.session import AgentSession, LoopStart
from bench.core.reaper import processes_in
from bench.devices.linux import LinuxDriver
from tests.linux_support import RunningBoard
from tests.supervised_run import SupervisedRun, run_frames

pytestmark = pytest.mark.e2e


def test_deploy_start_hello_run_stop(linux_board: RunningBoard) -> None:
    model = linux_board.device.settings.model

    async def flash_twice_and_run(driver):
        assert isinstance(driver, LinuxDriver)
        first = await driver.flash()
        again = await driver.flash()
        session = await AgentSession.open(await driver.open_agent(), device=linux_board.device.name)
        await session.sync_clock(8)
        await session.start(LoopStart(fps=linux_board.device.settings.fps_target, vsync_hz=60, frames=20))
        frames = [rec async for rec in session.frames(timeout=5)]
        stats = await session.stats()
        await session.close()
        await driver.close_agent()
        return first, again, session.info, frames, stats, driver.stopped_by

    first, again, hello, frames, stats, stopped_by = linux_board.drive(flash_twice_and_run, timeout_s=120)
    assert [s.step for s in first] == ["connect", "runtime", "deploy"] and all(s.ok for s in first)
    assert first[2].figures["files_sent"] > 5 and not first[2].skipped
    assert again[2].skipped and again[2].figures["bytes_sent"] == 0
    assert hello["proto"] == 1 and hello["runtime"] == "ai-edge-litert 2.3.0"
    assert hello["model"]["name"] == model.replace("-int8", "")
    assert [f.i for f in frames] == list(range(20)) and all(f.ran and f.t1 > f.t0 for f in frames)
    assert stats["frames"] == 20
    assert stopped_by == "shutdown" and processes_in(linux_board.virtual.root) == []


def _run_disturbed(board: RunningBoard, disturb: Callable[[LinuxDriver], object]) -> tuple[SupervisedRun, int, list]:
    """Flash `board` and run 60 frames at 30 fps, calling `disturb(driver)` once 0.6 s in (the frame loop has
    sent some frames by then): the run, the agent's pid at its end, and what `disturb` returned."""
    disturbed: list = []

    async def use(driver):
        async def once(session: AgentSession) -> None:
            if not disturbed:
                await asyncio.sleep(0.6)
                disturbed.append(disturb(driver))

        await driver.flash()
        run = await run_frames(driver, frames=60, fps=30, vsync_hz=60, feeder=once)
        return run, driver.agent.pid

    run, pid = board.drive(use, timeout_s=120)
    return run, pid, disturbed


def test_agent_killed_mid_run_is_restarted_and_frames_kept(linux_board: RunningBoard) -> None:
    def kill(driver: LinuxDriver) -> int:
        pid = driver.agent.pid
        os.kill(pid, signal.SIGKILL)  # as the OOM killer would
        return pid

    run, _, killed = _run_disturbed(linux_board, kill)
    assert run.complete and run.error is None
    assert len(run.segments) == 2 and run.segments[0].agent_pid == killed[0] != run.segments[1].agent_pid
    assert 0 < len(run.segments[0].frames) < 60
    assert len(run.frames) == 60
    kinds = [f.kind for f in run.faults]
    assert kinds == ["agent-exit", "agent-restarted"]
    assert "agent exited during the run" in run.faults[0].detail


def test_ssh_cut_mid_run_reconnects_and_the_agent_carries_on(linux_board: RunningBoard) -> None:
    run, pid_after, cuts = _run_disturbed(linux_board, lambda driver: linux_board.virtual.drop_connections())
    assert cuts and cuts[0] >= 1
    assert run.complete and len(run.frames) == 60
    assert len(run.segments) == 2 and run.segments[0].agent_pid == run.segments[1].agent_pid == pid_after
    kinds = [f.kind for f in run.faults]
    assert {"ssh-dropped", "ssh-reconnected", "agent-link-lost"} <= set(kinds) and "agent-exit" not in kinds

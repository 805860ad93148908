"""A frame run that survives its agent: when the link to the agent ends before the run is done, find
out why (agent process gone, or only the SSH connection), record it, restart the agent if needed and
carry on with the frames still owed. Everything measured before the fault is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.agent.session import AgentSession, FrameRecord
from bench.devices.linux import AgentFault, LinuxDriver
from bench.devices.resilient import start_fresh
from bench.errors import BenchError, DeviceUnreachable

# Runs beside the frame loop of each agent session (e.g. a replayer feeding inputs).
SessionFeeder = Callable[[AgentSession], Awaitable[None]]


@dataclass
class Segment:
    """The frames of one agent process (a restart starts a new segment)."""

    agent_pid: int
    hello: dict[str, Any]
    frames: list[FrameRecord] = field(default_factory=list)
    agent_faults: list[dict[str, Any]] = field(default_factory=list)  # `fault` messages the agent sent


@dataclass
class SupervisedRun:
    """Everything a supervised run measured, and what went wrong on the way."""

    device: str
    frames_wanted: int
    segments: list[Segment] = field(default_factory=list)
    faults: list[AgentFault] = field(default_factory=list)  # agent exits, restarts, SSH drops
    error: str | None = None  # set when the run had to give up (results so far are kept)

    @property
    def frames(self) -> list[FrameRecord]:
        """Every frame record of every segment, in order."""
        return [rec for seg in self.segments for rec in seg.frames]

    @property
    def complete(self) -> bool:
        """True when all wanted frames arrived."""
        return len(self.frames) >= self.frames_wanted


async def run_frames(
    driver: LinuxDriver,
    *,
    frames: int,
    fps: int | None = None,
    vsync_hz: int | None = None,
    budget_ms: int | None = None,
    key_every: int = 1,
    feeder: SessionFeeder | None = None,
    frame_timeout_s: float = 5.0,
    max_restarts: int = 3,
) -> SupervisedRun:
    """Run `frames` display frames on the device's agent, restarting the agent when it dies."""
    settings = driver.device.settings
    fps = fps or settings.fps_target
    vsync_hz = vsync_hz or settings.vsync_hz
    budget_ms = budget_ms or settings.decision_budget_ms
    run = SupervisedRun(driver.device.name, frames)
    restarts = 0
    faults_seen = len(driver.faults)
    while not run.complete:
        owed = frames - len(run.frames)
        try:
            ended_cleanly = await _one_segment(
                driver, run, owed, fps, vsync_hz, budget_ms, key_every, feeder, frame_timeout_s
            )
        except BenchError as exc:
            if isinstance(exc, DeviceUnreachable) and await driver.agent_survived():
                raise  # the agent runs but does not answer: not something a restart fixes
            ended_cleanly = False
        if ended_cleanly or run.complete:
            break
        # the link ended early: the agent died, or only the SSH connection did
        if await driver.agent_survived():
            driver.faults.append(AgentFault(time.monotonic_ns(), "agent-link-lost", "the agent kept running"))
            continue
        restarts += 1
        if restarts > max_restarts:
            run.error = f"device {driver.device.name!r}: the agent died {restarts} times; giving up"
            break
        await driver.restart_agent(f"agent exited during the run after {len(run.frames)} frame(s)")
    run.faults = driver.faults[faults_seen:]
    return run


async def _one_segment(
    driver: LinuxDriver,
    run: SupervisedRun,
    owed: int,
    fps: int,
    vsync_hz: int,
    budget_ms: int,
    key_every: int,
    feeder: SessionFeeder | None,
    frame_timeout_s: float,
) -> bool:
    """Open a session, run up to `owed` frames into a new segment; True when the agent said `stopped`."""
    session = await driver.open_session()
    assert driver.agent is not None
    segment = Segment(agent_pid=driver.agent.pid, hello=session.info)
    run.segments.append(segment)
    feeding: asyncio.Task | None = None
    try:
        await start_fresh(
            session, {"fps": fps, "vsync_hz": vsync_hz, "key_every": key_every, "budget_ms": budget_ms, "frames": owed}
        )
        if feeder is not None:
            feeding = asyncio.create_task(feeder(session))
        with contextlib.suppress(DeviceUnreachable):
            async for rec in session.frames(timeout=frame_timeout_s):
                segment.frames.append(rec)
        return session.last_stopped is not None
    finally:
        if feeding is not None:
            feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await feeding
        segment.agent_faults.extend(session.faults)
        await session.close()

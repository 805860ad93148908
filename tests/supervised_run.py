"""A frame run of so many frames that survives its agent (a SurvivingSession underneath), for the Linux agent's
end-to-end tests: when the link to
the agent ends before the run is done, the bench finds out why (agent process gone, or only the SSH
connection), records it, restarts the agent if needed and carries on with the frames still owed. Everything
measured before the fault is kept, per agent process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bench.agent.frame import Frame
from bench.agent.session import AgentSession, LoopStart
from bench.core.lifecycle import cancel
from bench.devices.linux import AgentFault, LinuxDriver
from bench.recovery.surviving import AgentGaveUp, SurvivingSession

# Runs beside the frame loop of each agent session (e.g. a replayer feeding inputs).
SessionFeeder = Callable[[AgentSession], Awaitable[None]]


@dataclass
class AgentSegment:
    """The frames of one agent process (a restart starts a new segment)."""

    agent_pid: int
    hello: dict[str, Any]
    frames: list[Frame] = field(default_factory=list)


@dataclass
class SupervisedRun:
    """Everything a supervised run measured, and what went wrong on the way."""

    device: str
    frames_wanted: int
    segments: list[AgentSegment] = field(default_factory=list)
    faults: list[AgentFault] = field(default_factory=list)  # agent exits, restarts, SSH drops
    agent_faults: list[dict[str, Any]] = field(default_factory=list)  # `fault` messages the agents sent
    error: str | None = None  # set when the run had to give up (results so far are kept)

    @property
    def frames(self) -> list[Frame]:
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
    run = SupervisedRun(driver.device.name, frames)
    faults_seen = len(driver.faults)
    feeding: list[asyncio.Task] = []

    def new_segment(session: AgentSession) -> None:
        assert driver.agent is not None
        run.segments.append(AgentSegment(agent_pid=driver.agent.pid, hello=session.info))
        if feeder is not None:
            feeding.append(asyncio.create_task(feeder(session)))

    session = await SurvivingSession.open(driver.device, driver, max_restarts=max_restarts, on_session=new_segment)
    try:
        await session.start(
            LoopStart(
                fps=fps or settings.fps_target,
                vsync_hz=vsync_hz or settings.vsync_hz,
                budget_ms=budget_ms or settings.decision_budget_ms,
                key_every=key_every,
                frames=frames,
            )
        )
        async for rec in session.frames(timeout=frame_timeout_s):
            run.segments[-1].frames.append(rec)
    except AgentGaveUp as exc:
        run.error = str(exc)
    finally:
        for task in feeding:
            await cancel(task, Exception)
        run.agent_faults = session.faults
        await session.close()
    run.faults = driver.faults[faults_seen:]
    return run

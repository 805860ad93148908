"""`replay_fleet`: the replay stage as a library call (the CLI and the nightly run use it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench.agent import wire
from bench.agent.endpoint import OpenAgent
from bench.config.fleet import Device
from bench.core.outcomes import FailureClass
from bench.replay.pacing import Pacer
from bench.replay.phases import Phase
from bench.replay.plan import build_plan
from bench.replay.recording import Session, read_session
from bench.replay.run import DEFAULT_WAVES, DeviceRun, ReplayRun

if TYPE_CHECKING:  # the run's record (begin/finish); what the replay writes into it goes through a RunSink
    from bench.store.results import ResultStore

# progress(run) is called about every PROGRESS_S while the replay runs
PROGRESS_S = 0.25


@dataclass
class ReplayResult:
    """A finished replay run."""

    run_id: int
    session_id: str
    inputs: int
    speed: float | None
    realtime: bool | None  # the pacer ran under a real-time priority (None: nothing was played)
    devices: list[DeviceRun]
    phases: list[Phase] = field(default_factory=list)  # where the run's time went (bench.replay.phases)
    recorded_s: float = 0.0  # the session's recorded length

    @property
    def status(self) -> str:
        """ok when every device passed (finished without the recovery ladder having to bring it back), else
        failed: a device that stopped answering is never ok."""
        return "ok" if all(d.outcome.cls == FailureClass.PASS for d in self.devices) else "failed"


async def replay_fleet(
    devices: list[Device],
    session_file: str | Path | Session,
    store: ResultStore,
    open_agent: OpenAgent | None = None,
    *,
    make_opener: Callable[[int], OpenAgent] | None = None,
    speed: float | None = 1.0,
    voice: str = "auto",
    realtime: bool = True,
    bench: str = "",
    git_rev: str | None = None,
    progress: Callable[[ReplayRun], None] | None = None,
    kind: str = "replay",
    waves: str = DEFAULT_WAVES,
) -> ReplayResult:
    """Replay `session_file` (a path, or a Session already read) into `devices` (links already resolved)
        and store the run; returns it.

        Agents are opened with `open_agent`, or with `make_opener(run_id)` for openers that store things of
        their own with the run (e.g. bench.recovery.linux_endpoint.LinuxAgentOpener's telemetry). `kind` is the stored
    run's kind ("confirm" for the nightly's replays of a suspected regression). `waves`: how the devices are
    grouped into waves (bench.replay.run.waves)."""
    if (open_agent is None) == (make_opener is None):
        raise ValueError("give exactly one of open_agent and make_opener")
    session = session_file if isinstance(session_file, Session) else read_session(session_file)
    plan = build_plan(session, wire.encode)
    session = replace(session, messages=[])  # the plan's lines are what plays: no decoded payload kept
    run_id = store.runs.begin_run(
        kind, bench=bench, session=session.session_id, speed=speed, git_rev=git_rev,
        config={"session_file": str(session.path or ""), "voice": voice, "devices": [d.name for d in devices]},
    )  # fmt: skip
    opener = open_agent if open_agent is not None else make_opener(run_id)
    run = ReplayRun(plan, devices, opener, store, run_id, speed=speed, voice=voice, pacer=Pacer(), realtime=realtime,
                    waves=waves)  # fmt: skip
    ticker = asyncio.create_task(_tick(run, progress)) if progress else None
    status = "interrupted"
    try:
        await run.execute()
        status = "ok" if all(r.status == "ok" for r in run.runs) else "failed"
    finally:
        if ticker:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        outcome = run.outcome
        store.runs.finish_run(
            run_id,
            status,
            {
                "inputs": len(plan.inputs),
                "realtime_priority": bool(outcome and outcome.realtime),
                "devices": {r.device.name: r.status for r in run.runs},
                "phases": run.timer.to_json(),
            },
        )
    if progress:
        progress(run)
    return ReplayResult(
        run_id,
        session.session_id,
        len(plan.inputs),
        speed,
        run.outcome.realtime if run.outcome else None,
        run.runs,
        run.timer.phases,
        plan.duration_ns / 1e9,
    )


async def _tick(run: ReplayRun, progress: Callable[[ReplayRun], None]) -> None:
    while True:
        progress(run)
        await asyncio.sleep(PROGRESS_S)

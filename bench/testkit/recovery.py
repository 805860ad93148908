"""Bringing back a device a test left broken, before the next test uses it: a short ladder of steps, each
followed by a health check. The ladder is a plain tuple of steps, so a fuller one (power control, resets)
can take its place: `pytest_plugin` takes it from the `hil_recovery_ladder` fixture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bench.errors import BenchError
from bench.testkit.agent import DeviceAgent


@dataclass(frozen=True)
class RecoveryStep:
    """One rung: a name for reports and what it does to the device."""

    name: str
    run: Callable[[DeviceAgent], Awaitable[None]]


async def _restart(agent: DeviceAgent) -> None:
    await agent.restart()


async def _redeploy(agent: DeviceAgent) -> None:
    await agent.redeploy()


LADDER: tuple[RecoveryStep, ...] = (
    RecoveryStep("restart agent", _restart),
    RecoveryStep("redeploy", _redeploy),
)


class DeviceBroken(BenchError):
    """Every recovery step failed; the message is one line naming the device and the cause."""


async def recover(agent: DeviceAgent, cause: str, ladder: Sequence[RecoveryStep] = LADDER) -> str:
    """Climb `ladder` until the agent answers; return the step that worked. DeviceBroken otherwise."""
    tried = []
    for step in ladder:
        try:
            await step.run(agent)
            await agent.check()
        except Exception as exc:  # a rung failing for any reason moves on to the next one
            tried.append(f"{step.name}: {_first_line(exc)}")
            continue
        return step.name
    raise DeviceBroken(f"device {agent.name}: {cause}; recovery failed ({'; '.join(tried) or 'no steps'})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

"""Bringing back a device a test left broken, before the next test uses it: a short ladder of steps, each
followed by a health check. The ladder is a plain tuple of steps, so a fuller one (power control, resets)
can take its place: `pytest_plugin` takes it from the `hil_recovery_ladder` fixture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bench.core.errors import BenchError
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
    for step in ladder:
        try:
            await step.run(agent)
            await agent.check()
        except Exception as exc:  # a rung failing for any reason moves on to the next one
            agent.console.feed(
                f"[bench] recovery step '{step.name}' failed: {without_device(exc, agent.name)}", "bench"
            )
            continue
        return step.name
    tried = ", ".join(step.name for step in ladder) or "none"
    raise DeviceBroken(f"device {agent.name}: {cause} (recovery tried: {tried}; see its console log)")


def without_device(exc: BaseException, name: str) -> str:
    """The first line of `exc`'s message without a leading "device NAME:" (the caller names the device)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    for prefix in (f"device {name}: ", f"device {name!r}: ", f"{name}: "):
        text = text.removeprefix(prefix)
    return text

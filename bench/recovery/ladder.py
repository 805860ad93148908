"""The recovery ladder: when a device stops answering, try in order of cost until it answers again.

    restart_agent -> soft_reset -> hard_reset -> power_cycle -> reflash

After each step the bench checks that the agent answers (`hello` within `check_timeout_s`). A step the
device cannot do (no reset line on its link, no `power` table in the fleet file) is noted and passed.
`recover()` returns which step brought the device back and how long the ladder took; with a results store
it records the failure and the outcome in the device's history, and marks the device `bad` (with the
reason) when no step worked. It is the one entry point for the nightly, `fleet health --fix` and pytest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.agent.session import AgentSession
from bench.config.fleet import Device
from bench.core.errors import BenchError
from bench.devices import driver_for
from bench.devices.base import Driver
from bench.power import PowerDriver, power_for
from bench.store.health import BAD, FAILURE, RECOVERED, UNRECOVERED
from bench.store.results import ResultStore

STEPS = ("restart_agent", "soft_reset", "hard_reset", "power_cycle", "reflash")
SETTLE_S = {"hard_reset": 0.5, "power_cycle": 1.0}  # let the device boot before asking it
CHECK_TIMEOUT_S = 5.0


@dataclass
class StepOutcome:
    """One rung of the ladder."""

    step: str
    tried: bool  # False: the device cannot do this step (the reason is in `detail`)
    ok: bool  # the device answered after it
    seconds: float
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"step": self.step, "tried": self.tried, "ok": self.ok, "seconds": round(self.seconds, 3),
                "detail": self.detail}  # fmt: skip


@dataclass
class RecoveryResult:
    """What the ladder did for one device."""

    device: str
    why: str  # what made the bench start it (no hello, transport dead, frame loop stalled)
    recovered: bool = False
    step: str | None = None  # the step after which the device answered
    seconds: float = 0.0  # from the start of the ladder until it answered (or gave up)
    steps: list[StepOutcome] = field(default_factory=list)
    session: AgentSession | None = None  # with keep_open: the agent session that answered (caller closes it)
    driver: Driver | None = None  # the driver that session belongs to

    @property
    def reason(self) -> str:
        """Why it did not recover: the trigger and what the last tried step said."""
        tried = [s for s in self.steps if s.tried]
        last = f"; last step {tried[-1].step}: {tried[-1].detail}" if tried else ""
        return f"{self.why}; no step of the recovery ladder brought it back{last}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"device": self.device, "why": self.why, "recovered": self.recovered, "step": self.step,
                "seconds": round(self.seconds, 3), "steps": [s.to_json() for s in self.steps]}  # fmt: skip


Step = Callable[[Driver, PowerDriver | None], Awaitable[None]]


async def _restart_agent(driver: Driver, power: PowerDriver | None) -> None:
    await driver.close_agent()  # the check opens (starts) a fresh one


async def _soft_reset(driver: Driver, power: PowerDriver | None) -> None:
    await driver.soft_reset()


async def _hard_reset(driver: Driver, power: PowerDriver | None) -> None:
    await driver.hard_reset()


async def _power_cycle(driver: Driver, power: PowerDriver | None) -> None:
    if power is None:
        raise NotImplementedError("no `power` table in the fleet file")
    with contextlib.suppress(BenchError, OSError):
        await driver.close_agent()
    await power.cycle()


async def _reflash(driver: Driver, power: PowerDriver | None) -> None:
    with contextlib.suppress(BenchError, OSError):
        await driver.close_agent()
    failed = next((s for s in await driver.flash() if not s.ok), None)
    if failed is not None:
        raise BenchError(f"{failed.step}: {failed.detail}")


ACTIONS: dict[str, Step] = {
    "restart_agent": _restart_agent,
    "soft_reset": _soft_reset,
    "hard_reset": _hard_reset,
    "power_cycle": _power_cycle,
    "reflash": _reflash,
}


async def answers(
    driver: Driver, timeout_s: float = CHECK_TIMEOUT_S, *, keep_open: bool = False
) -> AgentSession | None:
    """Open the device's agent and wait for its hello; the session when `keep_open`, else it is closed again.
    Raises BenchError/OSError/TimeoutError when the device does not answer."""
    driver.answer_timeout_s = timeout_s
    transport = await asyncio.wait_for(driver.open_agent(), 4 * timeout_s + 10)
    try:
        session = await AgentSession.open(
            transport, device=driver.device.name, timeout=driver.reply_timeout_s, hello_timeout=timeout_s
        )
    except BaseException:
        with contextlib.suppress(Exception):
            await driver.close_agent()
        raise
    if keep_open:
        return session
    await session.close()
    await driver.close_agent()
    return None


async def recover(
    device: Device,
    why: str,
    *,
    driver: Driver | None = None,
    store: ResultStore | None = None,
    run_id: int | None = None,
    log_dir: Path | None = None,
    steps: tuple[str, ...] = STEPS,
    check_timeout_s: float = CHECK_TIMEOUT_S,
    keep_open: bool = False,
) -> RecoveryResult:
    """Climb the ladder for `device` (which stopped answering because `why`) until its agent answers.
    With `store`, the failure and the outcome go into its history, and a device no step brought back is
    marked bad. With `keep_open`, the answering session is handed back (`result.session`, `result.driver`)."""
    driver = driver or driver_for(device, log_dir=log_dir)
    power = power_for(device) or driver.machine_power()
    result = RecoveryResult(device.name, why)
    if store is not None:
        store.health.record_event(device.name, FAILURE, run_id=run_id, detail=why)
    started = time.monotonic()
    for name in steps:
        t0 = time.monotonic()
        try:
            await ACTIONS[name](driver, power)
        except NotImplementedError as exc:
            result.steps.append(StepOutcome(name, False, False, time.monotonic() - t0, str(exc)))
            continue
        except (BenchError, OSError, TimeoutError) as exc:
            detail = _first_line(exc)
            result.steps.append(StepOutcome(name, True, False, time.monotonic() - t0, detail))
            continue
        await asyncio.sleep(SETTLE_S.get(name, 0.0))
        try:
            session = await answers(driver, check_timeout_s, keep_open=keep_open)
        except (BenchError, OSError, TimeoutError) as exc:
            result.steps.append(StepOutcome(name, True, False, time.monotonic() - t0, f"no answer: {_first_line(exc)}"))
            continue
        result.steps.append(StepOutcome(name, True, True, time.monotonic() - t0, "answered"))
        result.recovered, result.step, result.session, result.driver = True, name, session, driver
        break
    result.seconds = time.monotonic() - started
    if not result.recovered:
        with contextlib.suppress(Exception):
            await driver.close_agent()
    if store is not None:
        if result.recovered:
            store.health.record_event(device.name, RECOVERED, step=result.step, seconds=result.seconds, run_id=run_id,
                         detail=why)  # fmt: skip
        else:
            store.health.record_event(
                device.name, UNRECOVERED, seconds=result.seconds, run_id=run_id, detail=result.reason
            )
            store.health.set_state(device.name, BAD, result.reason, run_id)
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__

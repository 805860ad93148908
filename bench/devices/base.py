"""What every device driver offers the bench: probe, flash/deploy, and the agent's link."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.config.fleet import Device
from bench.core.steps import Progress, StepResult, no_progress
from bench.links.probe_result import ProbeResult

if TYPE_CHECKING:
    from bench.power.protocol import PowerDriver

__all__ = ["Driver", "Progress", "StepResult", "no_progress"]


class Driver(ABC):
    """How the bench uses one device of one kind. Same code path for real and virtual devices."""

    # how long opening the agent waits for the device to answer at all (the recovery ladder shortens it)
    answer_timeout_s: float = 10.0

    def __init__(self, device: Device, log_dir: Path | None = None) -> None:
        self.device = device
        self.log_dir = log_dir
        # held for several users in a row (bench.devices.held): `release_agent` then keeps the agent running
        self.keep_agent = False

    @property
    def reply_timeout_s(self) -> float:
        """How long the agent on this device may take to answer a request: its kind's setting (fleet-settable)."""
        return float(self.device.settings.reply_timeout_s)

    @abstractmethod
    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """Bring the device to the wanted firmware, agent and model; verify every write."""

    @abstractmethod
    async def open_agent(self):
        """Start the agent (if needed) and return an open `bench.agent` transport to it."""

    @abstractmethod
    async def close_agent(self) -> None:
        """Stop the agent cleanly and close the transport."""

    async def release_agent(self) -> None:
        """One user is done with the agent: stop it (`close_agent`), or, on a driver held for the next user
        (`keep_agent`), only close the link (`drop_link`): the agent, and the machine it runs on, stay up."""
        if self.keep_agent:
            await self.drop_link()
        else:
            await self.close_agent()

    async def drop_link(self) -> None:
        """Close the link to the agent and leave the agent running, for `open_agent` to reach again. Default: stop
        it, as a kind does whose agent is started anew on every open (a serial board's REPL, a browser page)."""
        await self.close_agent()

    async def probe(self, timeout_s: float) -> ProbeResult:
        """Does the device answer on its link, without talking to its agent (default: the link type's probe)."""
        if self.device.link is None:
            return ProbeResult(False, "virtual device not started (no link)")
        return await self.device.link.probe(self.device.kind, timeout_s)

    async def soft_reset(self) -> None:
        """Ask the device's own software to restart it (NotImplementedError when the kind cannot)."""
        raise NotImplementedError(f"{type(self).__name__} has no soft reset")

    async def hard_reset(self) -> None:
        """Reset the device through its reset line (NotImplementedError when its link has none)."""
        raise NotImplementedError(f"{type(self).__name__} has no hard reset")

    def machine_power(self) -> PowerDriver | None:
        """The device's own supply when the bench runs the machine itself (QEMU); None for hardware, whose
        power is the fleet file's `power` table."""
        return None

    async def follow_console(self, emit: Callable[[str], None]) -> None:
        """Hand each line the device's own console prints, beyond what the agent link carries, to `emit` until
        cancelled. Default: the agent link is the console (a serial board), there is nothing more to follow."""
        return

    def agent_sources(self) -> dict[str, Path]:
        """Agent file as the device names it (in a traceback) -> its source in this checkout."""
        return {}

"""What every device driver offers the bench: probe, flash/deploy, and the agent's link."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from bench.fleet import Device
from bench.steps import Progress, StepResult, no_progress

__all__ = ["Driver", "Progress", "StepResult", "no_progress"]


class Driver(ABC):
    """How the bench uses one device of one kind. Same code path for real and virtual devices."""

    # how long the agent on this kind of device may take to answer a request (slow targets raise it)
    reply_timeout_s: float = 5.0

    def __init__(self, device: Device, log_dir: Path | None = None) -> None:
        self.device = device
        self.log_dir = log_dir

    @abstractmethod
    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """Bring the device to the wanted firmware, agent and model; verify every write."""

    @abstractmethod
    async def open_agent(self):
        """Start the agent (if needed) and return an open `bench.agent` transport to it."""

    @abstractmethod
    async def close_agent(self) -> None:
        """Stop the agent cleanly and close the transport."""

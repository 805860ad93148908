"""The one power protocol every power backend implements: on, off, cycle, status.

A backend is a class with the settings its fleet-file table takes (`SETTINGS`: a `PowerSettings` subclass,
declared as every setting is, bench.core.fields.Declared) and four coroutines. A new backend (a PDU's API, a
QEMU guest) subclasses `PowerDriver`, implements `on`, `off` and `status`, and registers itself in
`bench.power.BACKENDS`; `cycle` comes for free.
"""

from __future__ import annotations

import asyncio
import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

from bench.core.errors import BenchError
from bench.core.fields import Configured, Declared, ranged

DEFAULT_OFF_S = 2.0  # how long a power cycle leaves the device without power (caps drain, USB re-enumerates)
MAX_OFF_S = 600.0  # the longest a power cycle keeps a board off


class PowerState(enum.StrEnum):
    """What a power backend says about the device's supply."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"  # the backend cannot read it back (e.g. a relay script without a status command)


class PowerError(BenchError):
    """A power backend failed (its tool is missing, exited non-zero or timed out)."""


@dataclass(frozen=True, kw_only=True)
class PowerSettings(Declared):
    """What every `power` table may set; a backend's settings class adds its own fields."""

    off_s: float = ranged(DEFAULT_OFF_S, 0.0, MAX_OFF_S)  # how long `cycle` leaves the device off

    def programs(self) -> dict[str, str]:
        """The programs the backend runs that the table names (program -> the path or name given): none here."""
        return {}


@dataclass(frozen=True)
class PowerSpec:
    """A device's `power = { driver = ..., ... }` table, validated into its backend's settings."""

    driver: str
    settings: PowerSettings = field(default_factory=PowerSettings)
    base_dir: Path = Path(".")  # the fleet file's folder: relative paths in the settings resolve against it

    @property
    def off_s(self) -> float:
        """How long a power cycle leaves the device off."""
        return self.settings.off_s


S = TypeVar("S", bound=PowerSettings)


class PowerDriver(Configured[S], ABC):
    """Switches one device's power. Same class for a real hub port and a virtual board's; `S` is its settings
    class (`SETTINGS`)."""

    SETTINGS: ClassVar[type[PowerSettings]] = PowerSettings  # what its fleet-file table takes besides `driver`

    @property
    def where(self) -> str:
        """How the backend reaches the supply, for messages (e.g. `uhubctl hub 1-1 port 2`)."""
        return self.spec.driver

    @abstractmethod
    async def on(self) -> None:
        """Switch the supply on."""

    @abstractmethod
    async def off(self) -> None:
        """Switch the supply off."""

    @abstractmethod
    async def status(self) -> PowerState:
        """Read the supply's state back."""

    async def cycle(self, off_s: float | None = None) -> None:
        """Off, wait (`off_s`, default the spec's), on."""
        await self.off()
        await asyncio.sleep(self.spec.off_s if off_s is None else off_s)
        await self.on()


async def run_tool(argv: list[str], *, what: str, timeout_s: float = 30.0, env: dict[str, str] | None = None) -> str:
    """Run a power tool; its stdout, or PowerError with its stderr (missing tool, exit code, timeout)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
        )
    except OSError as exc:
        raise PowerError(f"{what}: cannot run {argv[0]}: {exc.strerror}", hint=f"is {argv[0]} installed?") from None
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise PowerError(f"{what}: {argv[0]} did not finish within {timeout_s:g} s") from None
    if proc.returncode != 0:
        text = (err or out).decode("utf-8", "replace").strip().splitlines()
        raise PowerError(f"{what}: {argv[0]} exited {proc.returncode}: {text[-1] if text else 'no output'}")
    return out.decode("utf-8", "replace")

"""Flash every selected device at once: each in its own task, with retries and backoff, a log per device.

One device failing (port gone mid-write, reset mid-write, timeout) never stops the others. A board
interrupted mid-write is left with a bad image; the next run finds the MD5 differs and writes it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.config.fleet import Device
from bench.config.kinds import driven
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.logcap import CappedLog
from bench.core.outcomes import PASS, Outcome, infrastructure
from bench.devices import driver_for, has_driver
from bench.devices.base import Driver, Progress, StepResult
from bench.provision.controls import BoardControls

DEFAULT_ATTEMPTS = 3
DEFAULT_BACKOFF_S = 2.0


@dataclass
class DeviceFlash:
    """The outcome of flashing one device."""

    name: str
    kind: str
    ok: bool
    attempts: int
    seconds: float
    reason: str = ""  # why it failed (last attempt)
    steps: list[StepResult] = field(default_factory=list)
    log: str | None = None
    unreachable: bool = False  # the last attempt could not reach the device at all
    refused: bool = False  # bad input (a ConfigError: an unpinned image, a bmap that lies): nothing was touched

    @property
    def up_to_date(self) -> bool:
        """True when nothing had to be written."""
        return self.ok and all(s.skipped for s in self.steps)

    @property
    def outcome(self) -> Outcome:
        """The failure class (bench.core.outcomes): a flash or OS write that failed, or a device that could not be
        reached for it, is an infrastructure failure."""
        if self.ok:
            return PASS
        return infrastructure(f"{'link lost' if self.unreachable else 'flash failed'}: {self.reason}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data["up_to_date"] = self.up_to_date
        data["outcome"] = self.outcome.to_json()
        return data


ProgressFactory = Callable[[Device], Progress]


def make_driver(
    device: Device,
    log_dir: Path,
    firmware: Path | None,
    os: bool = False,
    controls: BoardControls | None = None,
    force_os: bool = False,
) -> Driver:
    """The device's driver, given `firmware` when its kind flashes firmware images, and for a board with a
    `[device.os]` table whether to write its OS (`os`) and its power/storage `controls`."""
    if not has_driver(device.kind):
        raise ConfigError(
            f"device {device.name!r}: kind {device.kind!r} has no driver",
            hint=f"kinds with a driver: {', '.join(driven())}",
        )
    kwargs: dict[str, Any] = {"log_dir": log_dir}
    if firmware is not None and device.kind_info.firmware is not None:
        kwargs["firmware"] = firmware
    if device.os is not None:
        kwargs.update(os=os, controls=controls, force_os=force_os)
    return driver_for(device, **kwargs)


def _log(log_dir: Path, device: Device, text: str) -> None:
    with CappedLog(log_dir / f"{device.name}.log") as fh:
        fh.write(f"{time.strftime('%H:%M:%S')} {text}\n")


async def flash_device(
    device: Device,
    log_dir: Path,
    progress: Progress,
    *,
    firmware: Path | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff_s: float = DEFAULT_BACKOFF_S,
    os: bool = False,
    controls: BoardControls | None = None,
    force_os: bool = False,
) -> DeviceFlash:
    """Flash one device, retrying failed attempts with exponential backoff; never raises."""
    started = time.monotonic()
    log_dir.mkdir(parents=True, exist_ok=True)
    reason, unreachable, refused = "", False, False
    steps: list[StepResult] = []
    attempt = 0
    try:
        driver = make_driver(device, log_dir, firmware, os, controls, force_os)
    except ConfigError as exc:
        return DeviceFlash(device.name, device.kind, False, 0, 0.0, str(exc), refused=True)
    try:
        for attempt in range(1, attempts + 1):
            _log(log_dir, device, f"attempt {attempt}/{attempts}")
            try:
                steps = await driver.flash(progress)
            except ConfigError as exc:  # bad input (e.g. an image for another chip): retrying cannot help
                reason, refused = str(exc), True
                _log(log_dir, device, f"refused: {reason}")
                break
            except DeviceUnreachable as exc:  # no answer on its link: retry, and say so if it stays that way
                steps, reason, unreachable = [], str(exc), True
            except Exception as exc:  # a driver bug or an unexpected transport error: record it, retry
                steps, reason, unreachable = [], f"{type(exc).__name__}: {exc}", False
            else:
                unreachable = False
                failed = [s for s in steps if not s.ok]
                if not failed:
                    _log(log_dir, device, "ok: " + "; ".join(f"{s.step}: {s.detail}" for s in steps))
                    return DeviceFlash(device.name, device.kind, True, attempt, time.monotonic() - started, "", steps,
                                       str(log_dir / f"{device.name}.log"))  # fmt: skip
                reason = f"{failed[0].step}: {failed[0].detail}"
            _log(log_dir, device, f"failed: {reason}")
            if attempt < attempts:
                await asyncio.sleep(backoff_s * 2 ** (attempt - 1))
    finally:
        close = getattr(driver, "close", None)
        if close is not None:
            await close()
    return DeviceFlash(device.name, device.kind, False, attempt, time.monotonic() - started, reason, steps,
                       str(log_dir / f"{device.name}.log"), unreachable, refused)  # fmt: skip


async def flash_devices(
    devices: list[Device],
    log_dir: Path,
    progress_for: ProgressFactory,
    *,
    firmware: Path | None = None,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff_s: float = DEFAULT_BACKOFF_S,
    os: bool = False,
    force_os: bool = False,
    boards: dict[str, BoardControls] | None = None,
) -> list[DeviceFlash]:
    """Flash all `devices` in parallel; results in the order given. `os`: write Linux boards' OS images
    where their fingerprint differs; `boards`: power/storage controls by device name (virtual boards';
    real ones take theirs from the fleet)."""
    boards = boards or {}
    jobs = [
        flash_device(
            d,
            log_dir,
            progress_for(d),
            firmware=firmware,
            attempts=attempts,
            backoff_s=backoff_s,
            os=os,
            controls=boards.get(d.name),
            force_os=force_os,
        )
        for d in devices
    ]
    return list(await asyncio.gather(*jobs))

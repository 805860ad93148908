"""What provisioning needs of a board besides SSH: a power switch and its storage on the bench host.

Two small interfaces, so any power controller can stand behind `Power` (a `bench.power` backend: the fleet's
`power` table, or `[device.os]`'s `power_on`/`power_off` commands through the command backend) and any
storage path behind `Storage` (a USB-SD-Mux, a Pi in mass-storage mode, a virtual board's disk file). Real
and virtual boards go through the same calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.config.fleet import Device
from bench.core.errors import BenchError, ConfigError, DeviceUnreachable
from bench.core.folders import open_append
from bench.core.procs import stop_process
from bench.power import PowerSpec, power_for
from bench.power.command import CommandPower, CommandSettings

STORAGE_APPEAR_TIMEOUT_S = 60.0


class Power(Protocol):
    """Switches a board's power."""

    async def on(self) -> None:
        """Power the board on (it boots from its storage)."""

    async def off(self) -> None:
        """Cut the board's power."""


class Storage(Protocol):
    """A board's card or eMMC as the bench host sees it."""

    async def to_host(self) -> Path:
        """Switch the storage to the bench host (the board is off); the path to write (block device or file)."""

    async def settle(self) -> None:
        """Make sure what was written reached the medium (before it is read back)."""

    async def to_board(self) -> None:
        """Give the storage back to the board."""


@dataclass
class BoardControls:
    """A board's power switch and storage path; either may be missing (then provisioning says what to add)."""

    power: Power | None = None
    storage: Storage | None = None


async def run_command(argv: tuple[str, ...] | list[str], what: str, timeout_s: float, log: Path | None,
                      cwd: Path | None = None, on_line=None) -> str:  # fmt: skip
    """Run a bench-host command with a timeout, its output appended to `log` (and each line to `on_line`).
    Returns its output; BenchError naming `what`, the command and the end of its output when it fails."""
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except FileNotFoundError:
        raise ConfigError(f"{what}: command not found: {argv[0]}", hint="install it or fix the fleet's argv") from None
    lines: list[str] = []
    log_fh = open_append(log) if log else None
    try:
        if log_fh:
            log_fh.write(f"$ {shlex.join(argv)}\n")
        assert proc.stdout is not None
        async with asyncio.timeout(timeout_s):
            while raw := await proc.stdout.readline():
                line = raw.decode("utf-8", "replace").rstrip()
                lines.append(line)
                if log_fh:
                    log_fh.write(f"[{time.monotonic() - started:8.1f}] {line}\n")
                    log_fh.flush()
                if on_line is not None:
                    on_line(line)
            await proc.wait()
    except TimeoutError:
        await stop_process(proc, 5)
        raise BenchError(f"{what}: {argv[0]} did not finish within {timeout_s:g} s", hint=f"see {log}") from None
    finally:
        if proc.returncode is None:
            await stop_process(proc, 5)
        if log_fh:
            log_fh.close()
    if proc.returncode != 0:
        tail = "; ".join(lines[-3:]) or "no output"
        raise BenchError(f"{what}: {shlex.join(argv)} exited with {proc.returncode}: {tail}", hint=f"see {log}")
    return "\n".join(lines)


class UsbStorage:
    """The board's card or eMMC as a block device on the bench host: behind a USB-SD-Mux (`usbsdmux SG host`
    / `dut`), or exposed by a command (a Pi 5 booted into mass-storage mode by `rpiboot`)."""

    def __init__(self, device: str, path: Path, usbsdmux: Path | None, attach: tuple[str, ...],
                 detach: tuple[str, ...], log: Path | None) -> None:  # fmt: skip
        self.device, self.path, self.usbsdmux, self.attach, self.detach, self.log = (
            device, path, usbsdmux, attach, detach, log)  # fmt: skip

    async def to_host(self) -> Path:
        """Switch the mux to the host (or run `attach`) and wait for the block device to appear."""
        if self.usbsdmux is not None:
            await run_command(["usbsdmux", str(self.usbsdmux), "host"], f"{self.device}: usbsdmux", 30, self.log)
        if self.attach:
            await run_command(self.attach, f"{self.device}: attach storage", 120, self.log)
        deadline = time.monotonic() + STORAGE_APPEAR_TIMEOUT_S
        while not self.path.exists():
            if time.monotonic() > deadline:
                raise DeviceUnreachable(
                    f"{self.device}: storage {self.path} did not appear within {STORAGE_APPEAR_TIMEOUT_S:g} s",
                    hint="check the USB-SD-Mux / mass-storage cable and the fleet's [device.os] storage path",
                )
            await asyncio.sleep(0.5)
        return self.path

    async def settle(self) -> None:
        """Flush the host's buffers for the device."""
        await asyncio.to_thread(os.sync)
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read back from the card, not the cache
            finally:
                os.close(fd)

    async def to_board(self) -> None:
        """Switch the mux back to the board (or run `detach`)."""
        if self.usbsdmux is not None:
            await run_command(["usbsdmux", str(self.usbsdmux), "dut"], f"{self.device}: usbsdmux", 30, self.log)
        if self.detach:
            await run_command(self.detach, f"{self.device}: detach storage", 120, self.log)


def fleet_controls(device: Device, log: Path | None) -> BoardControls:
    """The controls of a real board: its power from the fleet's `power` table (or the `[device.os]` table's
    power_on/power_off commands, run by the same command backend), its storage from `[device.os]`."""
    spec = device.os
    if spec is None:
        raise ConfigError(f"device {device.name!r}: no [device.os] table", hint="see docs/linux-boards.md")
    power: Power | None = power_for(device)  # the fleet's `power` table
    if power is None and spec.power_on:  # [device.os] power_on/power_off: the same shell-command backend
        commands = CommandSettings(on=shlex.join(spec.power_on), off=shlex.join(spec.power_off))
        power = CommandPower(device.name, PowerSpec("command", commands, base_dir=Path(".")))
    storage = None
    if spec.storage is not None:
        storage = UsbStorage(device.name, spec.storage, spec.usbsdmux, spec.attach, spec.detach, log)
    return BoardControls(power=power, storage=storage)

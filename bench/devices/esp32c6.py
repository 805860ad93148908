"""Driver for ESP32-C6 boards running MicroPython, on any serial port pyserial opens.

flash(): firmware with the esptool library (stub, MD5 skip, verify, reset), then the MicroPython agent
bundle with mpremote (sha256 checked on the board). open_agent(): interrupt, raw REPL, start
`npc_agent.run()` and hand the same serial connection to the bench as a line transport.
The same code serves /dev/ttyACM0, rfc2217:// (a remote or virtual board) and socket://.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import serial

from bench.agent.transport import SerialTransport
from bench.bundles import micropython_bundle
from bench.bundles.c6_firmware import device_firmware
from bench.config.fleet import Device, SerialLink
from bench.config.kinds import USB_SERIAL_JTAG
from bench.core.errors import BenchError, ConfigError, DeviceUnreachable
from bench.core.inputs import read_input
from bench.core.logcap import CappedLog
from bench.devices.base import Driver, Progress, StepResult, no_progress
from bench.devices.esp_image import ESP32C6_CHIP_ID, ImageError, parse_image
from bench.devices.esptool_link import flash_image, has_modem_lines
from bench.devices.mpremote_deploy import deploy_files, request_bootloader, request_reset
from bench.devices.serial_reset import can_hard_reset, hard_reset

FIRMWARE_OFFSET = 0x0  # MicroPython's ESP32_GENERIC_C6 .bin starts with the bootloader at 0x0
RAW_PROMPT = b"raw REPL; CTRL-B to exit\r\n>"
AGENT_START = b"import npc_agent\nnpc_agent.run()\n"
PROMPT_TIMEOUT_S = 10.0
T = TypeVar("T")


class FirmwareRefused(ConfigError):
    """The firmware file is not an image for this chip; nothing was sent to the board."""


def check_firmware(path: Path) -> bytes:
    """The bytes of `path` if it is a valid ESP32-C6 image; FirmwareRefused otherwise."""
    data = read_input(path, "firmware", hint="pass --firmware PATH")
    try:
        parse_image(data, chip_id=ESP32C6_CHIP_ID)
    except ImageError as exc:
        raise FirmwareRefused(
            f"firmware {path}: refused: {exc}",
            hint="use an ESP32-C6 image, e.g. MicroPython's ESP32_GENERIC_C6 .bin (see firmware/esp32c6/README.md)",
        ) from None
    return data


class Esp32c6Driver(Driver):
    """An ESP32-C6 with MicroPython on a serial link (real or virtual alike)."""

    def __init__(self, device: Device, log_dir: Path | None = None, firmware: Path | None = None) -> None:
        super().__init__(device, log_dir)
        self.firmware_configured = bool(firmware or self.device.settings.firmware)
        self.firmware_given = Path(firmware) if firmware else None
        self._agent: SerialTransport | None = None

    @property
    def link(self) -> SerialLink:
        """The board's serial link (ConfigError when the device has none)."""
        link = self.device.link
        if not isinstance(link, SerialLink):
            raise ConfigError(f"device {self.device.name!r}: no serial port", hint="set `port` in the fleet file")
        return link

    def _open_log(self) -> CappedLog | None:
        if self.log_dir is None:
            return None
        return CappedLog(self.log_dir / f"{self.device.name}.log")

    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """Firmware (skipped when up to date), then the agent bundle; both verified on the board."""
        if not self.firmware_configured and not self.device.virtual:
            raise ConfigError(
                f"device {self.device.name!r}: no firmware configured for a real board "
                f"(the default {self.device.kind_info.firmware.name} only boots on virtual boards)",
                hint="set `firmware` in the fleet file or pass --firmware (see firmware/esp32c6/README.md)",
            )
        self.firmware = self.firmware_given or device_firmware(self.device, progress=progress)
        image = check_firmware(self.firmware)  # before touching the board
        bundle_dir = Path(tempfile.mkdtemp(prefix=f"npc-bundle-{self.device.name}-"))
        files = micropython_bundle(self.device, bundle_dir)
        link = self.link
        log = self._open_log()
        steps: list[StepResult] = []
        try:
            _write(log, f"== flash {self.device.name} on {link.url}: {self.firmware} ({len(image)} bytes)")
            started = time.monotonic()

            def firmware_progress(done: int, total: int) -> None:
                progress(done, total, "firmware")

            try:
                if not has_modem_lines(link.url):  # no DTR/RTS to strap the chip: ask its MicroPython
                    await in_own_thread(request_bootloader, link.url, link.baud, log)
                outcome = await in_own_thread(
                    flash_image,
                    link.url,
                    image,
                    offset=FIRMWARE_OFFSET,
                    baud=link.baud,
                    log_file=log,
                    progress=firmware_progress,
                    usb_serial_jtag=self.device.settings.usb == USB_SERIAL_JTAG,
                )
            except Exception as exc:  # esptool raises FatalError, SerialException, OSError...
                steps.append(StepResult("firmware", False, _reason(exc), seconds=time.monotonic() - started))
                return steps
            seconds = time.monotonic() - started
            detail = f"{outcome.chip} {outcome.mac}: " + (
                f"wrote {len(image)} bytes ({outcome.bytes_sent} compressed), verified"
                if outcome.written
                else "up to date"
            )
            steps.append(
                StepResult(
                    "firmware",
                    True,
                    detail,
                    skipped=not outcome.written,
                    seconds=seconds,
                    figures={"bytes": len(image), "seconds": seconds},
                )
            )
            _write(log, f"firmware: {detail}")
            started = time.monotonic()

            def deploy_progress(done: int, total: int) -> None:
                progress(done, total, "agent")

            try:
                result = await in_own_thread(
                    deploy_files, link.url, link.baud, files, log=log, progress=deploy_progress
                )
            except Exception as exc:  # mpremote raises TransportError, SerialException, OSError...
                steps.append(StepResult("agent", False, _reason(exc), seconds=time.monotonic() - started))
                return steps
            detail = f"{len(result.sent)} sent, {len(result.unchanged)} up to date, sha256 verified"
            steps.append(
                StepResult(
                    "agent",
                    True,
                    detail,
                    skipped=not result.sent,
                    seconds=time.monotonic() - started,
                    figures={"files": len(files), "sent": len(result.sent)},
                )
            )
            _write(log, f"agent: {detail}")
            return steps
        finally:
            shutil.rmtree(bundle_dir, ignore_errors=True)
            if log is not None:
                log.close()

    async def open_agent(self) -> SerialTransport:
        """Interrupt whatever runs, start `npc_agent.run()` from the raw REPL, return the line transport."""
        link = self.link
        try:
            port = await asyncio.to_thread(
                serial.serial_for_url, link.url, baudrate=link.baud, timeout=0.05
            )  # rfc2217: no write_timeout
        except (serial.SerialException, OSError, ValueError) as exc:
            raise DeviceUnreachable(f"device {self.device.name!r}: cannot open {link.url}: {exc}") from None
        try:
            await in_own_thread(_start_agent, port, self.answer_timeout_s)
        except BaseException:
            port.close()
            raise
        self._agent = SerialTransport(port, link.url)
        return self._agent

    async def soft_reset(self) -> None:
        """`machine.reset()` through the raw REPL (DeviceUnreachable when no REPL answers)."""
        await self.close_agent()
        link = self.link
        if not await in_own_thread(request_reset, link.url, link.baud):
            raise DeviceUnreachable(f"device {self.device.name!r}: no MicroPython REPL to ask for a reset")

    async def hard_reset(self) -> None:
        """Pulse EN over DTR/RTS with esptool's sequence (USB-Serial-JTAG timing on such a port)."""
        await self.close_agent()
        link = self.link
        if not can_hard_reset(link.url):
            raise NotImplementedError(f"{link.url} carries no DTR/RTS")
        try:
            await in_own_thread(hard_reset, link.url, usb_jtag=self.device.settings.usb == USB_SERIAL_JTAG or None)
        except (OSError, serial.SerialException) as exc:
            raise DeviceUnreachable(f"device {self.device.name!r}: hard reset on {link.url}: {exc}") from None

    def agent_sources(self) -> dict[str, Path]:
        """The agent's modules, all at the top of the board's filesystem."""
        from bench.bundles.mpy_board import agent_files

        return {src.name: src for src in agent_files()}

    async def close_agent(self) -> None:
        """Ctrl-C the agent, leave the raw REPL for the friendly one, close the port."""
        agent, self._agent = self._agent, None
        if agent is None:
            return
        with contextlib.suppress(BenchError, OSError, serial.SerialException):
            await agent.send(b"\x03")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_until_prompt(agent), 3.0)
            await agent.send(b"\x02")
        await agent.close()


async def _until_prompt(agent: SerialTransport) -> None:
    tail = b""
    while True:
        line = await agent.readline()
        if not line:
            return
        tail = (tail + line)[-64:]
        if b"\x04>" in tail:
            return


async def in_own_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run blocking `fn` in a thread of its own: a fleet flashes many boards for minutes at once, more than
    asyncio's default pool (cores + 4 threads) would run side by side."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the awaiting task
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    threading.Thread(target=work, name=f"{getattr(fn, '__name__', 'job')}-thread", daemon=True).start()
    return await future


def _settle(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _start_agent(port: serial.SerialBase, timeout_s: float = PROMPT_TIMEOUT_S) -> None:
    """On an open port: interrupt, enter the raw REPL, soft-reset (so every start has a fresh VM, as after a
    board reset), run the agent (blocking; run in a thread)."""
    port.write(b"\r\x03\x03")
    time.sleep(0.1)
    port.reset_input_buffer()
    port.write(b"\r\x01")
    _read_until(port, RAW_PROMPT, timeout_s)
    port.write(b"\x04")
    _read_until(port, b"soft reboot\r\n", timeout_s)
    _read_until(port, RAW_PROMPT, timeout_s)
    port.write(AGENT_START + b"\x04")
    _read_until(port, b"OK", timeout_s)


def _read_until(port: serial.SerialBase, marker: bytes, timeout_s: float = PROMPT_TIMEOUT_S) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout_s
    while not data.endswith(marker):
        if time.monotonic() > deadline:
            seen = marker.decode(errors="replace").strip().rstrip(">").strip()
            raise DeviceUnreachable(
                f"{port.name}: the MicroPython REPL did not answer (no {seen!r} in {timeout_s:g} s)",
                hint="a board never flashed has no MicroPython: `hilbench flash --device NAME` flashes it",
            )
        data += port.read(1)
    return data


def _write(log: CappedLog | None, text: str) -> None:
    if log is not None:
        log.write(text + "\n")
        log.flush()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")

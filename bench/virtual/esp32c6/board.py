"""One virtual ESP32-C6: reset and strapping logic, ROM download mode, boot check, MicroPython app.

UART input arrives through `feed()` from any front end; UART output goes to every attached sink and
to a bounded log. Modes: held in reset, ROM download (ROM or stub dialect), app (MicroPython),
boot loop (no valid image). All timing is asyncio; the board never blocks the loop.

The app is what the flashed image is: an image built for the counted core (bench.virtual.esp32c6.core_image)
runs in qemu-system-riscv32 -icount (bench.virtual.esp32c6.core), its UART passed through untouched and its
exit code acted on as the chip's resets; any other valid image runs the MicroPython unix-port VM behind the
board's own REPL (repl.py, vm.py), timed by the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import struct
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from bench.config.kinds import UART_BRIDGE, USB_SERIAL_JTAG
from bench.virtual.esp32c6.boot import (
    RESET_CAUSES,
    boot_loop_text,
    check_flash_image,
    loader_text,
    rom_banner,
    watchdog_text,
)
from bench.virtual.esp32c6.core import CountedCore
from bench.virtual.esp32c6.core_image import core_elf, runs_on_core
from bench.virtual.esp32c6.counted import FirmwareExit, ResetCause, Vfs
from bench.virtual.esp32c6.efuse import Efuses, RegisterFile
from bench.virtual.esp32c6.flash import FILESYSTEM_OFFSET, FlashStorage, SpiFlashController
from bench.virtual.esp32c6.repl import Repl, ReplExit
from bench.virtual.esp32c6.rom import After, RomLoader
from bench.virtual.esp32c6.slip import SlipDecoder, slip_encode
from bench.virtual.esp32c6.wifi import Gateway

ROM_BAUD = 115200
USB_BAUD_EQUIVALENT = 10_000_000  # USB full speed moves ~1 MB/s through the CDC-ACM port whatever baud is set
BOOT_PIN_LATCH_S = 0.25  # IO9 low within this long after EN rises selects download mode
BOOT_LOOP_PERIOD_S = 1.0
LOG_LIMIT = 256 * 1024
# UART input the board holds for a chip that has not taken it yet, a client: a front end reads on only when the chip
# has room (`Board.input_room`), as a USB host's OUT transfers wait for the device, so a client sending without end
# waits and the board's memory does not grow
INPUT_HIGH = 64 * 1024
INPUT_POLL_S = 0.005
CORE_ELF = "core.elf"  # in the state folder: the flashed image's segments as QEMU loads them (rewritten every boot)
# what the counted core's exit asks for: (boot into download mode, the reset as the ROM reports it)
CORE_EXITS = {
    FirmwareExit.RESET: (False, "software"),
    FirmwareExit.BOOTLOADER: (True, "software"),
    FirmwareExit.WDT: (False, "task_wdt"),
    FirmwareExit.DEEPSLEEP: (False, "deepsleep"),
    FirmwareExit.PANIC: (False, "panic"),
}


class Mode(enum.Enum):
    """What the chip is doing."""

    RESET = "reset"  # EN held low
    DOWNLOAD = "download"  # ROM serial loader (or the stub after an upload)
    APP = "app"  # MicroPython running
    BOOT_LOOP = "boot-loop"  # no valid image at 0x0
    OFF = "off"  # no supply (the bench's USB hub port or relay switched it off)
    HUNG = "hung"  # the firmware stopped answering (a lock-up); a reset or power cycle ends it


@dataclass(frozen=True)
class BoardConfig:
    """Identity and storage of one virtual board."""

    name: str
    state_dir: Path
    mac: bytes
    flash_size: int = 8 * 1024 * 1024
    wire_speed: bool = False  # pace ROM/stub traffic at the simulated baud rate
    usb: str = UART_BRIDGE  # how the host's port reaches the chip: a USB-UART bridge, or the chip's own USB


class Board:
    """The chip and its flash; front ends feed it bytes and attach sinks for its output."""

    def __init__(self, config: BoardConfig) -> None:
        self.config = config
        self.flash = FlashStorage(config.state_dir / "flash.bin", config.flash_size, config.state_dir / "fs")
        self.efuses = Efuses(config.mac)
        self.registers = RegisterFile(self.efuses)
        self.spi = SpiFlashController(self.flash)
        self.mode = Mode.RESET
        self.log = bytearray()
        self.events: list[str] = []
        self._sinks: set[Callable[[bytes], None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._inbox_bytes = 0  # UART input queued for the ROM loader
        self._repl: Repl | None = None
        self._core: CountedCore | None = None
        self._lines = (False, False)  # (dtr, rts) as last set through RFC 2217
        self._boot_latch: asyncio.Task[None] | None = None
        self._boot_low_seen = False
        self._usb_download_flag = False  # USB-Serial-JTAG: set by (DTR, not RTS), cleared by neither
        self._usb_held: bool | None = None  # USB-Serial-JTAG: in reset; the boot mode latched when it began
        self._watchdog: asyncio.TimerHandle | None = None  # machine.WDT: the pending expiry
        self._watchdog_ms = 0
        self._baud = ROM_BAUD
        self._rx_free = self._tx_free = 0.0
        self.powered = True
        self.stuck = False  # a lock-up that survives resets and power cycles, until `repair()`
        self.gateway = Gateway()  # its Wi-Fi's NAT: the bench's servers it may reach, the datagrams dropped

    # -- wiring ----------------------------------------------------------------------------------

    def attach(self, sink: Callable[[bytes], None]) -> None:
        """Send UART output to `sink` too."""
        self._sinks.add(sink)

    def detach(self, sink: Callable[[bytes], None]) -> None:
        """Stop sending output to `sink`."""
        self._sinks.discard(sink)

    def write(self, data: bytes) -> None:
        """UART output: to every sink, and to the log."""
        if not data:
            return
        self.log += data
        if len(self.log) > LOG_LIMIT:
            del self.log[: len(self.log) - LOG_LIMIT]
        for sink in list(self._sinks):
            sink(data)

    def feed(self, data: bytes) -> None:
        """UART input."""
        if self.mode == Mode.APP and self._core is not None:
            self._core.feed(data)
        elif self.mode == Mode.APP and self._repl is not None:
            self._repl.feed(data)
        elif self.mode == Mode.DOWNLOAD:
            self._inbox.put_nowait(data)
            self._inbox_bytes += len(data)
        # held in reset or boot-looping: the bytes are lost, as on the chip

    async def input_room(self) -> None:
        """Until the chip has room for more UART input (at most INPUT_HIGH bytes wait for it): a front end awaits
        this before it reads its client on. A reset, power loss or mode change ends the wait."""
        core, repl = self._core, self._repl
        if self.mode == Mode.APP and core is not None:
            await core.drain()
            return
        while (self.mode == Mode.APP and repl is not None and repl is self._repl and repl.backlog >= INPUT_HIGH) or (
            self.mode == Mode.DOWNLOAD and self._inbox_bytes >= INPUT_HIGH
        ):
            await asyncio.sleep(INPUT_POLL_S)

    @property
    def vm_pid(self) -> int | None:
        """The MicroPython VM's process id while the app runs (None in the ROM, in reset or off)."""
        return self._repl.vm_pid if self.mode == Mode.APP and self._repl is not None else None

    @property
    def core(self) -> CountedCore | None:
        """The counted core while it runs the app (None in the ROM, in reset, off, or with the unix-port VM)."""
        return self._core if self.mode == Mode.APP else None

    # -- reset and strapping ---------------------------------------------------------------------

    async def power_on(self) -> None:
        """Apply power: boot from flash."""
        self.powered = True
        await self.reset(download=False, cause="poweron")

    async def power_off(self) -> None:
        """Remove power: nothing runs, the UART is silent and DTR/RTS do nothing until `power_on()`."""
        self._cancel_latch()
        await self.hold_reset()
        self.powered = False
        self.mode = Mode.OFF
        self.events.append("power off")

    async def hang(self, *, stuck: bool = False) -> None:
        """Lock the firmware up: no output, input ignored. Ended by a reset, unless `stuck` (then by `repair()`)."""
        await self._stop_task()
        self.stuck = self.stuck or stuck
        self.mode = Mode.HUNG
        self.events.append("hung" + (" (stuck)" if stuck else ""))

    def repair(self) -> None:
        """Clear a stuck lock-up; the board stays as it is until its next reset."""
        self.stuck = False
        self.events.append("repaired")

    async def reset(self, *, download: bool, cause: str = "poweron") -> None:
        """Pulse EN; boot into ROM download mode (`download`) or from flash."""
        self._usb_held = None
        await self.hold_reset()
        if not self.powered or self.stuck:
            await self._dead()
            return
        self._start(self._boot(download, cause))

    async def _dead(self) -> None:
        self.mode = Mode.OFF if not self.powered else Mode.HUNG

    async def hold_reset(self) -> None:
        """Pull EN low: stop whatever runs, until the next reset."""
        await self._stop_task()
        self._enter_reset()

    def _enter_reset(self) -> None:
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None
        self._repl = None
        self._core = None
        self._stop_watchdog()
        self.mode = Mode.RESET
        self.events.append("reset held")

    def set_lines(self, dtr: bool, rts: bool) -> None:
        """The host's DTR/RTS, as the board's USB personality wires them to the chip (nothing without power, or
        on a stuck board)."""
        if not self.powered or self.stuck:
            self._lines = (dtr, rts)
            return
        if self.config.usb == USB_SERIAL_JTAG:
            self._usb_lines(dtr, rts)
        else:
            self._bridge_lines(dtr, rts)

    def _usb_lines(self, dtr: bool, rts: bool) -> None:
        """The USB-Serial-JTAG peripheral's CDC-ACM line logic (what esptool's `usb-reset` drives): DTR and
        not RTS sets the download-mode flag, neither clears it, RTS and not DTR resets the chip (which samples
        the flag as the reset begins and runs again when the lines leave that state); both: no action."""
        self._lines = (dtr, rts)
        if rts and not dtr:
            if self._usb_held is None:
                self._usb_held = self._usb_download_flag
                self._enter_reset()
            return
        if dtr and not rts:
            self._usb_download_flag = True
        elif not dtr and not rts:
            self._usb_download_flag = False
        if self._usb_held is not None:
            download, self._usb_held = self._usb_held, None
            self._start(self._boot(download, "usb"))

    def _bridge_lines(self, dtr: bool, rts: bool) -> None:
        """DTR/RTS through the classic auto-reset circuit: EN low = RTS and not DTR; IO9 low = DTR and not RTS."""
        was_en_low = self._lines[1] and not self._lines[0]
        self._lines = (dtr, rts)
        en_low = rts and not dtr
        boot_low = dtr and not rts
        if en_low and not was_en_low:
            self._cancel_latch()
            self._enter_reset()
        elif was_en_low and not en_low:
            self._boot_low_seen = boot_low
            self._cancel_latch()
            self._boot_latch = asyncio.ensure_future(self._latch_boot_pin())
        elif boot_low and self._boot_latch is not None and not self._boot_latch.done():
            self._boot_low_seen = True
            self._cancel_latch()
            self._start(self._boot(True, "poweron"))

    async def _latch_boot_pin(self) -> None:
        if not self._boot_low_seen:
            await asyncio.sleep(BOOT_PIN_LATCH_S)
        self._start(self._boot(self._boot_low_seen, "poweron"))

    def _cancel_latch(self) -> None:
        latch = self._boot_latch
        if latch is not None and not latch.done() and latch is not asyncio.current_task():
            latch.cancel()
        self._boot_latch = None

    def release_lines(self) -> None:
        """A client closed the port: lines go idle without a reset (USB: the download flag clears)."""
        self._lines = (False, False)
        self._usb_download_flag = False

    async def close(self) -> None:
        """Power off and release the flash file."""
        self._cancel_latch()
        await self._stop_task()
        self.flash.close()

    # -- running modes ---------------------------------------------------------------------------

    def _start(self, coro: Coroutine[None, None, None]) -> None:
        if self._task is not None and not self._task.done() and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = asyncio.ensure_future(coro)
        self._task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.events.append(f"firmware crashed: {exc!r}")
            print(f"virtual board {self.config.name}: {exc!r}", file=sys.stderr)

    async def _stop_task(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._repl = None
        self._core = None

    async def _boot(self, download: bool, cause: str) -> None:
        """From reset: the ROM's lines, then download mode, the boot loop or MicroPython (until the next reset)."""
        self._stop_watchdog()
        self.write(rom_banner(cause, download))
        if download:
            await self._download_mode()
            return
        decision = check_flash_image(self.flash.read(0, self.flash.size), self.efuses.revision)
        if decision.image is None:
            self.mode = Mode.BOOT_LOOP
            self.events.append(f"boot loop: {decision.problem}")
            first_word = struct.unpack("<I", self.flash.read(0, 4))[0]
            while True:
                await asyncio.sleep(BOOT_LOOP_PERIOD_S)
                self.write(boot_loop_text(decision.problem, first_word))
        self.write(loader_text(decision.image))
        self.mode = Mode.APP
        if runs_on_core(decision.image):
            self.events.append("app started (counted core)")
            download, next_cause = await self._run_core(core_elf(decision.image), cause)
            self._start(self._boot(download, next_cause))
            return
        self.events.append("app started")
        self._repl = Repl(
            self.flash.fs_dir,
            self.config.mac,
            self.write,
            decision.banner,
            self._watchdog_request,
            self.flash.filesystem_bytes,
        )
        exit_reason = await self._repl.run(RESET_CAUSES[cause].machine_cause)
        self._repl = None
        self._stop_watchdog()
        self._start(self._boot(exit_reason == ReplExit.BOOTLOADER, "software"))

    async def _run_core(self, elf: bytes, cause: str) -> tuple[bool, str]:
        """Run the flashed firmware on the counted core until it asks for a reset; what comes next (download mode,
        the reset cause). A reset from outside (EN, power) cancels this and kills QEMU."""
        path = self.config.state_dir / CORE_ELF
        path.write_bytes(elf)
        vfs = Vfs(self.flash.path, FILESYSTEM_OFFSET, self.flash.filesystem_bytes)
        cause_code = ResetCause(RESET_CAUSES[cause].machine_cause)
        core = CountedCore(path, vfs, self.config.mac, cause_code, self.write, self.gateway)
        self._core = core
        try:
            await core.start()
            code, errors = await core.wait()
        finally:
            self._core = None
            await core.stop()
        if code not in CORE_EXITS:
            self.events.append(f"counted core exited {code}: {errors[-300:]}")
            print(f"virtual board {self.config.name}: QEMU exited {code}: {errors}", file=sys.stderr)
            return False, "panic"
        self.events.append(f"counted core: {FirmwareExit(code).name.lower()}")
        return CORE_EXITS[FirmwareExit(code)]

    # -- machine.WDT (the task watchdog) ---------------------------------------------------------

    def _watchdog_request(self, timeout_ms: int | None) -> None:
        """machine.WDT(timeout=...) starts it, feed() restarts the countdown; it cannot be stopped."""
        if timeout_ms is not None:
            self._watchdog_ms = timeout_ms
        elif not self._watchdog_ms:
            return
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = asyncio.get_running_loop().call_later(self._watchdog_ms / 1000, self._watchdog_expired)

    def _watchdog_expired(self) -> None:
        self._watchdog = None
        if not self.powered or self.stuck:
            return
        self.events.append("task watchdog expired")
        self.write(watchdog_text())
        self._enter_reset()
        self._start(self._boot(False, "task_wdt"))

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = None
        self._watchdog_ms = 0

    async def _download_mode(self) -> None:
        self.mode = Mode.DOWNLOAD
        self.events.append("download mode")
        self._baud = ROM_BAUD
        self._inbox = asyncio.Queue()
        self._inbox_bytes = 0
        loader = RomLoader(self.flash, self.registers, self.spi)
        decoder = SlipDecoder()
        while True:
            data = await self._inbox.get()
            self._inbox_bytes -= len(data)
            await self._pace("rx", len(data))
            for frame in decoder.feed(data):
                reply = loader.handle(frame)
                for payload in reply.frames:
                    encoded = slip_encode(payload)
                    await self._pace("tx", len(encoded))
                    self.write(encoded)
                self.events.extend(loader.log)
                loader.log.clear()
                if reply.new_baud:
                    self._baud = reply.new_baud
                if reply.after in (After.RUN_APP, After.REBOOT):
                    self._start(self._boot(False, "software"))
                    return

    async def _pace(self, direction: str, size: int) -> None:
        if not self.config.wire_speed:
            return
        now = time.monotonic()
        baud = USB_BAUD_EQUIVALENT if self.config.usb == USB_SERIAL_JTAG else self._baud
        seconds = size * 10 / baud
        if direction == "rx":
            self._rx_free = max(now, self._rx_free) + seconds
            due = self._rx_free
        else:
            self._tx_free = max(now, self._tx_free) + seconds
            due = self._tx_free
        if due - now > 0.0005:
            await asyncio.sleep(due - now)

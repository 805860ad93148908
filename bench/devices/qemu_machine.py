"""One QEMU process the bench boots: argv, console capture, guest status lines, control channel, and
teardown that never leaves QEMU behind (own process group, SIGKILL on the bench's death)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.bundles import HOST_AGENT_PORT
from bench.config.fleet import QemuLink
from bench.core.errors import DeviceUnreachable
from bench.core.folders import own_folder
from bench.core.logcap import CappedLog
from bench.core.procs import COUNTED_NICE, DIE_WITH_BENCH

GUEST_AGENT_PORT = HOST_AGENT_PORT  # the port the host agent listens on everywhere
BOOT_TIMEOUT_S = 180.0  # QEMU start -> guest up: TCG on a loaded 2-core host; icount boots are slower still
GUEST_COAP_PORT = 5683
# util-linux's setpriv sets PR_SET_PDEATHSIG and execs QEMU (kept across exec): the kernel SIGKILLs QEMU when
# the bench process dies, however it dies. (A preexec_fn doing the same can deadlock in a threaded parent.)
_INIT_RE = re.compile(r"^NPC-INIT (\S+)(.*)$")
_PANIC_RE = re.compile(r"Kernel panic - not syncing: ?(.*)")


class GuestFault(DeviceUnreachable):
    """The guest or QEMU failed: a kernel panic, the agent out of memory or exiting, QEMU killed."""


@dataclass
class GuestStatus:
    """What the console has said so far."""

    lines: int = 0
    events: dict[str, dict[str, str]] = field(default_factory=dict)  # NPC-INIT event -> its key=value fields
    selftest: str | None = None  # the NPC-SELFTEST json, when one ran
    panic: str | None = None
    errors: list[str] = field(default_factory=list)
    port_taken: bool = False  # QEMU could not bind a forwarded port (another process took it first)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A free port on 127.0.0.1 for hostfwd (TCP or UDP)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class QemuMachine:
    """A booted guest: start(), wait_for(event), control(cmd), stop(). Console goes to `log_path`."""

    def __init__(
        self,
        name: str,
        link: QemuLink,
        kernel: Path,
        initrd: Path,
        cmdline: str,
        log_path: Path,
        *,
        ssh_port: int | None = None,
        disk: Path | None = None,
    ) -> None:
        self.name = name
        self.ssh_port = ssh_port  # host port forwarded to the guest's sshd (Linux-board guests)
        self.disk = disk  # raw disk image attached as virtio-blk (the board's storage)
        self.link = link
        self.kernel = kernel
        self.initrd = initrd
        self.cmdline = cmdline
        self.log_path = log_path
        self.agent_port = free_port()
        self.coap_port = free_port(socket.SOCK_DGRAM)
        self.status = GuestStatus()
        self.proc: asyncio.subprocess.Process | None = None
        self.started_ns = 0
        self.ready_ns: dict[str, int] = {}  # event -> monotonic ns it was seen
        self._changed = asyncio.Event()
        self._tmp = Path(tempfile.gettempdir()) / f"hilbench-qemu-{os.getpid()}-{id(self):x}"  # made by start()
        self._pump: asyncio.Task[None] | None = None
        self._stopping = False
        self.listeners: list[Callable[[str], None]] = []  # each console line (the bench's console followers)

    @property
    def ctl_path(self) -> Path:
        """The host side of the guest's virtio-serial control port."""
        return self._tmp / "ctl.sock"

    @property
    def qmp_path(self) -> Path:
        """The machine's QMP socket (reset, pause, power: bench/power/qmp.py)."""
        return self._tmp / "qmp.sock"

    def argv(self) -> list[str]:
        """The QEMU command line."""
        link = self.link
        net = f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.agent_port}-:{GUEST_AGENT_PORT}"
        net += f",hostfwd=udp:127.0.0.1:{self.coap_port}-:{GUEST_COAP_PORT}"
        if self.ssh_port is not None:
            net += f",hostfwd=tcp:127.0.0.1:{self.ssh_port}-:22"
        argv = [link.binary, "-M", link.machine, "-cpu", link.cpu, "-smp", str(link.smp), "-m", str(link.memory_mb)]
        argv += ["-kernel", str(self.kernel), "-initrd", str(self.initrd), "-append", self.cmdline]
        argv += ["-no-reboot", "-nographic", "-monitor", "none", "-qmp", f"unix:{self.qmp_path},server=on,wait=off"]
        argv += ["-netdev", net, "-device", "virtio-net-pci,netdev=n0", "-device", "virtio-rng-pci"]
        argv += ["-device", "virtio-serial-pci", "-chardev", f"socket,id=ctl,path={self.ctl_path},server=on,wait=off"]
        argv += ["-device", "virtserialport,chardev=ctl,name=bench.ctl"]
        if self.disk is not None:
            argv += ["-drive", f"file={self.disk},format=raw,if=none,id=disk0,cache=writeback"]
            argv += ["-device", "virtio-blk-pci,drive=disk0"]
        if link.timing == "icount":
            # one guest ns per instruction while busy; idle, the guest sleeps and its clock follows the host's real
            # time (sleep=on, QEMU's default). With sleep=off an idle guest's clock jumps to its next timer, so its
            # vCPU never sleeps: each guest kept a host core 100% busy even with no frame loop, and three of them
            # starved the 2-core host (docs/replay.md, "Measured")
            argv += ["-icount", "shift=0"]
        return argv

    async def start(self) -> None:
        """Start QEMU in its own process group; the console is pumped to the log and parsed."""
        if shutil.which(self.link.binary) is None:
            raise DeviceUnreachable(
                f"{self.name}: {self.link.binary} not found", hint="apt-get install qemu-system-arm"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        own_folder(self._tmp, "QEMU socket folder", private=True)
        self.started_ns = time.monotonic_ns()
        self.proc = await asyncio.create_subprocess_exec(
            *DIE_WITH_BENCH,
            *(COUNTED_NICE if self.link.timing == "icount" else ()),
            *self.argv(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own process group: teardown signals the whole group
        )
        self._pump = asyncio.create_task(self._read_console(), name=f"qemu-console-{self.name}")

    @property
    def pid(self) -> int | None:
        """QEMU's process id (also its process group id)."""
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        """QEMU has not exited."""
        return self.proc is not None and self.proc.returncode is None

    async def _read_console(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with CappedLog(self.log_path) as log:
            log.write(f"# {' '.join(self.argv())}\n".encode())
            while line := await _console_line(self.proc.stdout):
                stamp = (time.monotonic_ns() - self.started_ns) / 1e9
                log.write(b"[+%8.3f] " % stamp + line)
                log.flush()
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                self._parse(text)
                for listener in list(self.listeners):
                    listener(text)
            await self.proc.wait()
            log.write(f"# qemu exited: {self.exit_text()}\n".encode())
        self._changed.set()

    def _parse(self, text: str) -> None:
        self.status.lines += 1
        if match := _INIT_RE.match(text):
            event, rest = match.groups()
            self.status.events[event] = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
            self.ready_ns.setdefault(event, time.monotonic_ns())
            if event == "error":
                self.status.errors.append(rest.strip())
        elif text.startswith("NPC-SELFTEST "):
            self.status.selftest = text.removeprefix("NPC-SELFTEST ")
        elif "Could not set up host forwarding rule" in text:
            self.status.port_taken = True
        elif match := _PANIC_RE.search(text):
            self.status.panic = match.group(1).strip() or text.strip()
        self._changed.set()

    def exit_text(self) -> str:
        """How QEMU ended, in words."""
        rc = self.proc.returncode if self.proc else None
        if rc is None:
            return "running"
        if rc < 0:
            return f"killed by signal {signal.Signals(-rc).name}"
        return f"exit code {rc}"

    def fault(self) -> str | None:
        """A clear sentence when the guest or QEMU failed, else None."""
        if self.status.panic:
            return f"{self.name}: the guest kernel panicked: {self.status.panic}"
        exit_ = self.status.events.get("agent-exit")
        if exit_ is not None:
            limit = exit_.get("limit_mb", "?")
            if exit_.get("oom_kill", "0") not in ("0", ""):
                return (
                    f"{self.name}: the agent exceeded its memory limit of {limit} MB inside the guest "
                    f"and was OOM-killed (exit {exit_.get('rc')}, peak {exit_.get('mem_peak')} bytes)"
                )
            if exit_.get("rc") != "0":
                return f"{self.name}: the agent exited with code {exit_.get('rc')} (see {self.log_path})"
        if self.status.port_taken:
            return f"{self.name}: QEMU could not forward a host port (another process took it); see {self.log_path}"
        if self.proc is not None and self.proc.returncode is not None and not self._stopping:
            return f"{self.name}: QEMU ended unexpectedly ({self.exit_text()}); console in {self.log_path}"
        return None

    async def wait_for(self, event: str, timeout: float) -> dict[str, str]:
        """Wait for the guest's `NPC-INIT <event>` line; GuestFault if the guest fails first."""
        deadline = time.monotonic() + timeout
        while True:
            if event in self.status.events:
                return self.status.events[event]
            if (fault := self.fault()) is not None or not self.running:
                raise GuestFault(fault or f"{self.name}: QEMU stopped ({self.exit_text()}) before {event!r}")
            left = deadline - time.monotonic()
            if left <= 0:
                seen = f"; the guest reported: {'; '.join(self.status.errors)}" if self.status.errors else ""
                raise GuestFault(
                    f"{self.name}: no {event!r} from the guest within {timeout:g} s{seen} (see {self.log_path})"
                )
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))

    async def wait_exit(self, timeout: float) -> int | None:
        """Wait for QEMU to end; its return code, or None on timeout."""
        if self.proc is None:
            return None
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None
        if self._pump is not None:
            with contextlib.suppress(Exception):
                await self._pump
        return self.proc.returncode

    async def control(self, command: str, timeout: float = 10.0) -> str:
        """Send one command to the guest's /init over virtio-serial; its one-line reply."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.ctl_path)), timeout)
        except (OSError, TimeoutError) as exc:
            raise GuestFault(f"{self.name}: control channel {self.ctl_path}: {exc}") from None
        try:
            writer.write(command.encode() + b"\n")
            await writer.drain()
            reply = await asyncio.wait_for(reader.readline(), timeout)
        except (OSError, TimeoutError):
            reply = b""
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        return reply.decode("utf-8", "replace").strip()

    async def stop(self, grace: float = 20.0) -> None:
        """Power the guest off (control channel), then SIGTERM, then SIGKILL the process group."""
        self._stopping = True
        try:
            if self.running:
                with contextlib.suppress(GuestFault):
                    await asyncio.wait_for(self.control("poweroff", timeout=min(grace, 5.0)), grace)
                if await self.wait_exit(grace) is None:
                    self._signal(signal.SIGTERM)
                    if await self.wait_exit(5.0) is None:
                        self._signal(signal.SIGKILL)
                        await self.wait_exit(5.0)
        finally:
            self.kill()
            if self._pump is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._pump, 5.0)
            shutil.rmtree(self._tmp, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL QEMU's process group now (safe to call any time, also from sync teardown)."""
        self._stopping = True
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return  # reaped: its process group id may belong to someone else now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


async def _console_line(stdout: asyncio.StreamReader) -> bytes:
    """The console's next line; one longer than the reader's limit (64 KiB) is cut to its last 1 KiB and marked,
    so that a guest printing without newlines cannot end the pump."""
    try:
        return await stdout.readline()
    except ValueError:  # the reader dropped the overlong line (or the part of it it had)
        return b"[a console line over 64 KiB was cut]\n"

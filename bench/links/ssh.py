"""SSH to a Linux device through the system OpenSSH client: one ControlMaster connection per device.

Every command and port forward rides the device's master connection, so a command costs one
round trip instead of a full handshake. Authentication is by key only (BatchMode); the host key is
checked against the key pinned in the fleet file (`host_key`), a `known_hosts` file, or the user's
own known_hosts, in that order. When the master drops, the next use reconnects with exponential
backoff and re-opens the port forwards at the same local ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.errors import BenchError, ConfigError, DeviceUnreachable
from bench.core.folders import open_fresh, write_file
from bench.core.procs import stop_process, tied
from bench.links.spec import SshLink

SSH_BINARY = "ssh"
# ssh exits 255 for its own errors (connection, auth, host key); any other status is the remote command's.
SSH_ERROR_STATUS = 255


@dataclass
class CommandResult:
    """The outcome of one remote command."""

    command: str
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (errors replaced)."""
        return self.stdout.decode("utf-8", "replace")


@dataclass
class Backoff:
    """Reconnect pacing: first delay, growth factor, ceiling, and how long to keep trying."""

    first_s: float = 0.2
    factor: float = 2.0
    max_s: float = 5.0
    give_up_s: float = 30.0

    def delays(self):
        """Successive waits, growing up to `max_s`."""
        delay = self.first_s
        while True:
            yield delay
            delay = min(delay * self.factor, self.max_s)


@dataclass
class ConnectionEvent:
    """Something that happened to the connection (kept so a run can record it)."""

    t_ns: int
    kind: str  # "connected", "dropped", "reconnected"
    detail: str = ""


@dataclass
class _Forward:
    local_port: int
    remote_host: str
    remote_port: int


def classify_ssh_error(device: str, link: SshLink, stderr: str) -> BenchError:
    """Turn OpenSSH's stderr into an error that names the device and says what to do."""
    text = stderr.strip()
    last = text.splitlines()[-1] if text else "ssh exited without a message"
    where = f"device {device!r} ({link.target})"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key verification failed" in text:
        pinned = "the host_key pinned in the fleet file" if link.host_key else "the known host key"
        return ConfigError(
            f"{where}: host key verification failed: the device's host key does not match {pinned}",
            hint=f"if the device was reinstalled, check and pin its new key: hilbench linux pin --device {device}",
        )
    if "No ED25519 host key is known" in text or "No RSA host key is known" in text or "host key is known" in text:
        return ConfigError(
            f"{where}: host key not known, and host key checking is on",
            hint=f"pin it in the fleet file: run `hilbench linux pin --device {device}` and add the host_key line",
        )
    if "Permission denied" in text:
        key = f"key {link.key}" if link.key else "the default SSH keys"
        return DeviceUnreachable(
            f"{where}: SSH refused {key} for user {link.user!r} ({last})",
            hint=f"install the public key in ~{link.user}/.ssh/authorized_keys on the device (ssh-copy-id)",
        )
    if link.key is not None and ("no such identity" in text or "Load key" in text):
        return ConfigError(f"{where}: field 'key': cannot read {link.key} ({last})")
    return DeviceUnreachable(f"{where}: cannot connect over SSH: {last}", hint="is the device powered and on the net?")


def free_local_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshConnection:
    """A ControlMaster SSH connection to one device, with commands, streams and local port forwards."""

    device: str
    link: SshLink
    connect_timeout_s: float = 8.0
    alive_interval_s: float = 2.0  # ServerAliveInterval; three unanswered probes drop the connection
    backoff: Backoff = field(default_factory=Backoff)
    on_event: Callable[[ConnectionEvent], None] | None = None
    events: list[ConnectionEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        if shutil.which(SSH_BINARY) is None:
            raise ConfigError("the OpenSSH client `ssh` is not installed", hint="apt-get install openssh-client")
        # Short path: a Unix socket path must stay under ~104 bytes.
        self._dir = Path(tempfile.mkdtemp(prefix="hb-ssh-"))
        self._control = self._dir / "cm"
        self._master: asyncio.subprocess.Process | None = None
        self._forwards: list[_Forward] = []
        self._lock = asyncio.Lock()
        self._closed = False
        self._ever_connected = False

    # -- options ------------------------------------------------------------------------------------

    def _known_hosts_options(self) -> list[str]:
        link = self.link
        if link.host_key:
            host = link.host if link.port == 22 else f"[{link.host}]:{link.port}"
            known = self._dir / "known_hosts"
            write_file(known, f"{host} {link.host_key.strip()}\n", what="SSH folder")
            return ["-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes"]
        if link.known_hosts:
            if not Path(link.known_hosts).is_file():
                raise ConfigError(f"device {self.device!r}: field 'known_hosts': {link.known_hosts} does not exist")
            return ["-o", f"UserKnownHostsFile={link.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        return ["-o", "StrictHostKeyChecking=yes"]

    def base_args(self) -> list[str]:
        """ssh options shared by the master and every command (without the destination); the ssh process dies
        with the bench (bench.core.procs.tied)."""
        link = self.link
        args = [
            SSH_BINARY,
            "-p",
            str(link.port),
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={max(1, int(self.connect_timeout_s))}",
            "-o",
            f"ServerAliveInterval={max(1, round(self.alive_interval_s))}",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            f"ControlPath={self._control}",
            "-o",
            "LogLevel=ERROR",
            *self._known_hosts_options(),
        ]
        if link.key is not None:
            if not Path(link.key).is_file():
                raise ConfigError(f"device {self.device!r}: field 'key': {link.key} does not exist")
            args += ["-i", str(link.key), "-o", "IdentitiesOnly=yes"]
        return tied(args)

    @property
    def destination(self) -> str:
        """`user@host` for ssh."""
        return f"{self.link.user}@{self.link.host}"

    # -- master connection --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while the master process runs."""
        return self._master is not None and self._master.returncode is None

    async def connect(self) -> None:
        """Open the master connection; raises DeviceUnreachable/ConfigError naming the device."""
        await self.ensure_connected()

    async def _start_master(self) -> None:
        if self._closed:
            raise BenchError(f"device {self.device!r}: SSH connection already closed")
        log = self._dir / "master.log"
        with contextlib.suppress(FileNotFoundError):
            self._control.unlink()
        with open_fresh(log, what="SSH folder", binary=True) as err:
            self._master = await asyncio.create_subprocess_exec(
                *self.base_args(),
                "-M",
                "-N",
                "-o",
                "ControlPersist=no",
                "-o",
                "ExitOnForwardFailure=yes",
                self.destination,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.connect_timeout_s + 2
        while time.monotonic() < deadline:
            if self._master.returncode is not None or await self._check():
                break
            await asyncio.sleep(0.03)
        if self._master.returncode is not None or not await self._check():
            await self._kill_master()
            raise classify_ssh_error(self.device, self.link, log.read_text("utf-8", "replace"))
        for fwd in self._forwards:
            await self._add_forward(fwd)

    async def _check(self) -> bool:
        if not self._control.exists():
            return False
        proc = await asyncio.create_subprocess_exec(
            *self.base_args(),
            "-O",
            "check",
            self.destination,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return await proc.wait() == 0

    async def _kill_master(self) -> None:
        proc, self._master = self._master, None
        await stop_process(proc, 3)

    async def ensure_connected(self) -> None:
        """Reconnect with backoff if the master has dropped; raise DeviceUnreachable when it stays down."""
        if self.connected:
            return
        async with self._lock:
            if self.connected:
                return
            was_up = self._ever_connected
            if was_up:
                status = self._master.returncode if self._master is not None else "?"
                self._event("dropped", f"master connection exited (status {status})")
            started = time.monotonic()
            last_error: BenchError | None = None
            for delay in self.backoff.delays() if was_up else iter([0.0]):
                try:
                    await self._start_master()
                except ConfigError:
                    raise
                except BenchError as exc:
                    last_error = exc
                else:
                    self._ever_connected = True
                    self._event("reconnected" if was_up else "connected", self.link.target)
                    return
                if time.monotonic() - started + delay > self.backoff.give_up_s:
                    break
                await asyncio.sleep(delay)
            assert last_error is not None
            raise last_error

    def _event(self, kind: str, detail: str) -> None:
        event = ConnectionEvent(time.monotonic_ns(), kind, detail)
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    async def close(self) -> None:
        """Cancel forwards, close the master, remove the control folder."""
        self._closed = True
        await self._kill_master()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- commands -----------------------------------------------------------------------------------

    async def run(
        self,
        command: str,
        *,
        input: bytes | None = None,
        timeout_s: float = 60.0,
        check: bool = True,
        retry: bool = True,
    ) -> CommandResult:
        """Run a shell command on the device. `check` raises on a non-zero status; `retry` reruns the
        command once after a reconnect when the connection dropped under it (use only for idempotent ones)."""
        await self.ensure_connected()
        result = await self._run_once(command, input, timeout_s)
        if result.returncode == SSH_ERROR_STATUS and retry and not self.connected:
            await self.ensure_connected()
            result = await self._run_once(command, input, timeout_s)
        if result.returncode == SSH_ERROR_STATUS and not self.connected:
            raise classify_ssh_error(self.device, self.link, result.stderr.decode("utf-8", "replace"))
        if check and result.returncode != 0:
            detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
            raise BenchError(
                f"device {self.device!r}: `{_short(command)}` failed with status {result.returncode}"
                + (f": {detail[-1]}" if detail else "")
            )
        return result

    async def _run_once(self, command: str, input: bytes | None, timeout_s: float) -> CommandResult:
        proc = await asyncio.create_subprocess_exec(
            *self.base_args(),
            self.destination,
            command,
            stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(input), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise DeviceUnreachable(
                f"device {self.device!r}: `{_short(command)}` got no answer within {timeout_s:g} s"
            ) from None
        return CommandResult(command, proc.returncode if proc.returncode is not None else -1, stdout, stderr)

    async def stream(self, command: str) -> asyncio.subprocess.Process:
        """Start a long-running remote command; read its stdout lines from the returned process."""
        await self.ensure_connected()
        return await asyncio.create_subprocess_exec(
            *self.base_args(),
            self.destination,
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )

    # -- port forwards ------------------------------------------------------------------------------

    async def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> int:
        """Forward a free local port on 127.0.0.1 to `remote_host:remote_port` as seen from the device;
        return the local port. The forward survives reconnects (re-opened on the same local port)."""
        await self.ensure_connected()
        for _attempt in range(5):
            fwd = _Forward(free_local_port(), remote_host, remote_port)
            try:
                await self._add_forward(fwd)
            except BenchError:
                continue  # the port was taken between the probe and ssh's bind: pick another
            self._forwards.append(fwd)
            return fwd.local_port
        raise BenchError(f"device {self.device!r}: could not open a local port forward to {remote_port}")

    async def cancel_forward(self, local_port: int) -> None:
        """Stop forwarding `local_port`."""
        for fwd in list(self._forwards):
            if fwd.local_port == local_port:
                self._forwards.remove(fwd)
                if self.connected:
                    await self._control_command("cancel", fwd)

    async def _add_forward(self, fwd: _Forward) -> None:
        status, stderr = await self._control_command("forward", fwd)
        if status != 0:
            raise BenchError(f"device {self.device!r}: port forward {fwd.local_port} failed: {stderr.strip()}")

    async def _control_command(self, op: str, fwd: _Forward) -> tuple[int, str]:
        spec = f"127.0.0.1:{fwd.local_port}:{fwd.remote_host}:{fwd.remote_port}"
        proc = await asyncio.create_subprocess_exec(
            *self.base_args(),
            "-O",
            op,
            "-L",
            spec,
            self.destination,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await proc.communicate()
        return proc.returncode or 0, stderr.decode("utf-8", "replace")

    def __del__(self) -> None:  # last resort for a connection nobody closed: no master, no folder left behind
        master = getattr(self, "_master", None)
        if master is not None and master.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(master.pid, 15)
        if hasattr(self, "_dir"):
            shutil.rmtree(self._dir, ignore_errors=True)


def quote(*parts: str) -> str:
    """Shell-quote and join, for building remote commands."""
    return " ".join(shlex.quote(p) for p in parts)


def _short(command: str, limit: int = 80) -> str:
    return command if len(command) <= limit else command[: limit - 3] + "..."

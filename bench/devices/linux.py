"""Driver for Linux boards reached over SSH: NVIDIA Jetson Orin NX and Raspberry Pi 5.

Deploy = check the device's Python and tflite runtime, then send the host agent bundle and model
(only files whose sha256 differs on the device). The agent runs detached on the device, bound to
its loopback, and the bench reaches it through a port forwarded over the device's SSH connection,
so nothing new listens on the device's network. A dropped SSH connection is re-opened with backoff
(the agent keeps running); an agent that dies is noticed, recorded as a fault and restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config.fleet import Device, SshLink
from bench.core.errors import BenchError, ConfigError, DeviceUnreachable
from bench.core.procs import stop_process
from bench.devices.base import Driver, Progress, StepResult, no_progress
from bench.devices.deploy import Files, deploy
from bench.devices.linux_os import check_os, provision_os
from bench.devices.linux_runtime import RuntimeReport, check_runtime, install_hint
from bench.links.ssh import SshConnection, quote
from bench.provision.controls import BoardControls, fleet_controls
from bench.telemetry.monitor import TelemetryMonitor

_SAFE_DIR = re.compile(r"^[A-Za-z0-9_./~-]+$")
FOLLOW_STOP_GRACE_S = 2.0  # for the console's `tail -F` over SSH to end once asked
PORT_FILE = "agent.port"  # the agent writes its loopback port here, in the deploy folder
# The agent starts in this cgroup where the board has one (the bench's images make it at boot): its CPU time counted
# apart from the bench's own traffic and probes, which a virtual board's modelled rails leave out (docs/lab-control.md)
AGENT_CGROUP = "/sys/fs/cgroup/agent"


def alive_test(pid: int) -> str:
    """A POSIX shell test that succeeds while process `pid` runs (a zombie left unreaped counts as gone)."""
    return f's=$(sed \'s/.*) //\' /proc/{pid}/stat 2>/dev/null | cut -c1); [ -n "$s" ] && [ "$s" != Z ]'


@dataclass
class AgentFault:
    """Something that happened to the agent process or its link during a run."""

    t_ns: int
    kind: str  # "agent-exit", "ssh-dropped", "ssh-reconnected", "agent-restarted"
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"t_ns": self.t_ns, "kind": self.kind, "detail": self.detail}


@dataclass
class AgentBundle:
    """What to deploy for the agent, and how to start it from the deploy folder.

    `argv(python, port_file)` is the command line; the agent must listen on 127.0.0.1 (any free port)
    and write the bound port to `port_file` once it accepts connections."""

    files: Files
    argv: Callable[[str, str], list[str]]


def host_agent_bundle(device: Device, work_dir: Path | None = None) -> AgentBundle:
    """The reference host agent, the device's model and its signed manifest (kept under `work_dir` when
    given, else held in memory)."""
    from bench.bundles import host_agent_command, host_bundle

    if work_dir is not None:
        files: Files = {dest: src for src, dest in host_bundle(device, work_dir)}
    else:
        with tempfile.TemporaryDirectory(prefix=f"hilbench-{device.name}-") as tmp:
            files = {
                dest: (src.read_bytes() if src.is_relative_to(tmp) else src)
                for src, dest in host_bundle(device, Path(tmp))
            }

    def argv(python: str, port_file: str) -> list[str]:
        # relative paths: the agent starts in the deploy folder
        command = host_agent_command(device, ".", python=python, listen="127.0.0.1:0")
        return [*command, "--port-file", port_file]

    return AgentBundle(files, argv)


@dataclass
class AgentProcess:
    """The agent running on the device."""

    pid: int
    remote_port: int
    local_port: int
    started_ns: int = field(default_factory=time.monotonic_ns)


class LinuxDriver(Driver):
    """Jetson Orin NX / Raspberry Pi 5 over SSH (real boards and virtual ones alike)."""

    def __init__(
        self,
        device: Device,
        log_dir: Path | None = None,
        bundle: AgentBundle | None = None,
        *,
        os: bool = False,
        controls: BoardControls | None = None,
        force_os: bool = False,
    ) -> None:
        super().__init__(device, log_dir)
        self._bundle = bundle
        self.write_os = os  # flash() provisions the OS ([device.os]) when the fingerprint differs
        self.force_os = force_os
        self.controls = controls
        self.start_timeout_s = float(device.settings.agent_start_timeout_s)
        if not isinstance(device.link, SshLink):
            raise ConfigError(
                f"device {device.name!r}: no SSH link",
                hint="give ssh = 'user@host:port' in the fleet file, or start it as a virtual device",
            )
        self.link: SshLink = device.link
        self.python = device.python
        agent_dir = device.settings.agent_dir
        if not _SAFE_DIR.match(agent_dir):
            raise ConfigError(f"device {device.name!r}: field 'agent_dir': {agent_dir!r} has unsafe characters")
        self.folder = agent_dir if agent_dir.startswith("/") else f"$HOME/{agent_dir.removeprefix('~/')}"
        self.faults: list[AgentFault] = []
        self.agent: AgentProcess | None = None
        self.runtime: RuntimeReport | None = None
        self.stopped_by = ""  # how close_agent ended the last agent: "shutdown", "term" or "kill"
        self._conn: SshConnection | None = None
        self._transport = None

    # -- connection ---------------------------------------------------------------------------------

    async def connection(self) -> SshConnection:
        """The device's SSH connection, opened on first use (DeviceUnreachable names the device)."""
        if self._conn is None:
            # a board slower to answer (reply_timeout_s) also gets longer before its connection counts as dropped
            alive = max(2.0, self.reply_timeout_s / 3)
            self._conn = SshConnection(self.device.name, self.link, alive_interval_s=alive, on_event=self._on_ssh_event)
        await self._conn.ensure_connected()
        return self._conn

    def _on_ssh_event(self, event) -> None:
        if event.kind in ("dropped", "reconnected"):
            self.faults.append(AgentFault(event.t_ns, f"ssh-{event.kind}", event.detail))

    async def close(self) -> None:
        """Stop the agent and close the SSH connection (same as `close_agent`)."""
        await self.close_agent()

    # -- deploy -------------------------------------------------------------------------------------

    async def check(self) -> RuntimeReport:
        """Connect and check the device's Python and tflite runtime; BenchError says what is missing."""
        conn = await self.connection()
        report = await check_runtime(conn, self.python, self.device.kind)
        self.runtime = report
        if not report.ok:
            raise BenchError(
                f"device {self.device.name!r}: cannot run the agent with {report.executable} "
                f"(Python {report.python}, {report.machine}): " + "; ".join(report.problems),
                hint=install_hint(self.device.kind),
            )
        return report

    @property
    def bundle(self) -> AgentBundle:
        """The agent bundle this driver deploys and starts (the reference host agent by default)."""
        if self._bundle is None:
            self._bundle = host_agent_bundle(self.device, self.log_dir / "bundle" if self.log_dir else None)
        return self._bundle

    async def deploy_files(self, files: Files) -> StepResult:
        """Send `files` to the device's agent folder (only what changed)."""
        started = time.monotonic()
        result = await deploy(await self.connection(), self.folder, files)
        detail = f"sent {len(result.sent)} file(s), {result.bytes_sent} bytes; {len(result.unchanged)} unchanged"
        return StepResult(
            "deploy",
            ok=True,
            detail=detail,
            skipped=not result.sent,
            seconds=time.monotonic() - started,
            figures={"files_sent": len(result.sent), "bytes_sent": result.bytes_sent},
        )

    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """With a `[device.os]` table: the OS first (`provision_os` when `os` was asked, else a fingerprint
        check). Then connect, check the runtime, deploy the agent bundle and model. Stops at the first failed
        step."""
        steps: list[StepResult] = []
        if self.device.os is not None:
            steps.append(await self.os_step(progress))
            if not steps[-1].ok:
                return steps
        progress(0, 3, "connect")
        started = time.monotonic()
        await self.connection()
        steps.append(StepResult("connect", True, self.link.target, seconds=time.monotonic() - started))
        progress(1, 3, "check runtime")
        started = time.monotonic()
        try:
            report = await self.check()
        except BenchError as exc:
            steps.append(StepResult("runtime", False, str(exc), seconds=time.monotonic() - started))
            return steps
        steps.append(
            StepResult(
                "runtime",
                True,
                f"Python {report.python} ({report.machine}), {report.runtime}, numpy {report.numpy}",
                seconds=time.monotonic() - started,
            )
        )
        progress(2, 3, "deploy agent and model")
        steps.append(await self.deploy_files(self.bundle.files))
        progress(3, 3, "done")
        return steps

    async def os_step(self, progress: Progress = no_progress) -> StepResult:
        """Provision the OS (when asked) or only compare the board's fingerprint with the fleet's image."""
        log = self.log_dir / f"{self.device.name}.log" if self.log_dir else None
        if not self.write_os:
            return await check_os(self, progress)
        controls = self.controls or fleet_controls(self.device, log)
        return await provision_os(self, controls, progress, log=log, force=self.force_os)

    # -- agent process ------------------------------------------------------------------------------

    async def start_agent(self) -> AgentProcess:
        """Start the agent detached on the device (loopback only) and forward a local port to it."""
        conn = await self.connection()
        argv = quote(*self.bundle.argv(self.python, PORT_FILE))
        started = await conn.run(
            f'cd "{self.folder}" || exit 1; rm -f {PORT_FILE}; '
            f"{{ echo $$ >{AGENT_CGROUP}/cgroup.procs; }} 2>/dev/null; "
            f"setsid nohup {argv} >agent.log 2>&1 </dev/null & echo $! >agent.pid; echo $!",
            retry=False,
        )
        pid = int(started.text.strip().splitlines()[-1])
        remote_port = await self._wait_listening(conn, pid)
        local_port = await conn.forward(remote_port)
        self.agent = AgentProcess(pid=pid, remote_port=remote_port, local_port=local_port)
        return self.agent

    async def _wait_listening(self, conn: SshConnection, pid: int) -> int:
        """Wait until the agent wrote its port file and accepts on that port; return the port."""
        waiter = (
            "import os, socket, sys, time\n"
            f"end = time.time() + {self.start_timeout_s}\n"
            "while time.time() < end:\n"
            "    try: state = open('/proc/%d/stat' % " + str(pid) + ").read().rsplit(')', 1)[1].split()[0]\n"
            "    except OSError: state = 'Z'\n"
            "    if state == 'Z': print('exited'); sys.exit(0)\n"
            "    try:\n"
            f"        port = int(open({PORT_FILE!r}).read())\n"
            "        socket.create_connection(('127.0.0.1', port), 1).close(); print(port); sys.exit(0)\n"
            "    except (OSError, ValueError): time.sleep(0.05)\n"
            "print('timeout')\n"
        )
        command = f'cd "{self.folder}" && {quote(self.python)} -c {quote(waiter)}'
        state = (await conn.run(command, timeout_s=self.start_timeout_s + 10)).text.strip()
        if state.isdigit():
            return int(state)
        log = await self.agent_log()
        raise BenchError(
            f"device {self.device.name!r}: the agent "
            + ("exited at start" if state == "exited" else f"did not listen within {self.start_timeout_s:g} s")
            + (f"; its log ends: {log.strip().splitlines()[-1]}" if log.strip() else ""),
            hint=f"see {self.folder}/agent.log on the device",
        )

    async def agent_log(self, lines: int = 40) -> str:
        """The last lines of the agent's log on the device."""
        conn = await self.connection()
        return (await conn.run(f'tail -n {lines} "{self.folder}/agent.log" 2>/dev/null; true')).text

    async def follow_console(self, emit: Callable[[str], None]) -> None:
        """The agent's stderr and stdout (its `agent.log` on the device), followed over SSH until cancelled."""
        conn = await self.connection()
        proc = await conn.stream(f'tail -n 0 -F "{self.folder}/agent.log" 2>/dev/null')
        try:
            assert proc.stdout is not None
            while line := await proc.stdout.readline():
                emit(line.decode("utf-8", "replace").rstrip("\r\n"))
        finally:  # also when the SSH connection closed and ssh is exiting by itself
            await stop_process(proc, FOLLOW_STOP_GRACE_S)

    def agent_sources(self) -> dict[str, Path]:
        """The host agent's files, flat in the agent folder."""
        from bench.bundles import host_agent_sources

        return host_agent_sources()

    async def agent_alive(self) -> bool:
        """True while the agent process runs on the device."""
        if self.agent is None:
            return False
        conn = await self.connection()
        return (await conn.run(alive_test(self.agent.pid), check=False)).returncode == 0

    async def agent_survived(self, checks: int = 3, interval_s: float = 0.1) -> bool:
        """After its link ended: True when the agent is still running over a few checks (a process being
        killed can close its sockets a moment before it is gone)."""
        for n in range(checks):
            try:
                if not await self.agent_alive():
                    return False
            except DeviceUnreachable:
                return False
            if n < checks - 1:
                await asyncio.sleep(interval_s)
        return True

    async def open_agent(self):
        """Start the agent if it is not running and return a line transport to it through the SSH forward."""
        from bench.agent.transport import StreamTransport

        if self.agent is None:
            await self.start_agent()
        elif not await self.agent_alive():
            await self.restart_agent("agent gone when the bench reconnected")
        assert self.agent is not None
        self._transport = await StreamTransport.connect("127.0.0.1", self.agent.local_port)
        return self._transport

    async def open_session(self, attempts: int = 5):
        """An `AgentSession` whose hello succeeded, retried with backoff while the SSH connection settles
        after a drop (a dying master can refuse or drop the forwarded connection). An agent that turns out
        dead meanwhile is restarted and recorded (`open_agent`)."""
        from bench.agent.session import AgentSession

        delay = 0.2
        for _attempt in range(attempts - 1):
            with contextlib.suppress(DeviceUnreachable):
                return await AgentSession.open(
                    await self.open_agent(), device=self.device.name, timeout=self.reply_timeout_s
                )
            await asyncio.sleep(delay)
            delay *= 2
        return await AgentSession.open(await self.open_agent(), device=self.device.name, timeout=self.reply_timeout_s)

    async def restart_agent(self, why: str) -> AgentProcess:
        """Record that the agent died (`why`, with the end of its log) and start it again."""
        log = await self.agent_log(5)
        tail = log.strip().splitlines()[-1] if log.strip() else ""
        self.faults.append(AgentFault(time.monotonic_ns(), "agent-exit", f"{why}{'; log: ' + tail if tail else ''}"))
        await self._close_transport()
        await self._release_forward()
        self.agent = None
        agent = await self.start_agent()
        self.faults.append(AgentFault(time.monotonic_ns(), "agent-restarted", f"pid {agent.pid}"))
        return agent

    async def close_agent(self, grace_s: float = 3.0) -> None:
        """Stop the agent cleanly (protocol `shutdown`; TERM, then KILL, only if it does not exit within
        `grace_s`), drop the forward and close the SSH connection (the next use opens a new one).
        `stopped_by` says how it ended: "shutdown", "term" or "kill"."""
        await self._close_transport()
        if self.agent is not None and self._conn is not None:
            pid = self.agent.pid
            said_bye = await self._ask_shutdown(grace_s)
            ticks = int(grace_s * 10)
            wait = f"i=0; while {alive_test(pid)} && [ $i -lt {ticks} ]; do sleep 0.1; i=$((i+1)); done"
            stop = (
                f"{wait}; "
                f"if {alive_test(pid)}; then kill -TERM {pid}; {wait}; "
                f"if {alive_test(pid)}; then kill -KILL {pid}; echo kill; else echo term; fi; "
                f"else echo {'shutdown' if said_bye else 'term'}; fi; "
                f'rm -f "{self.folder}/agent.pid"'
            )
            with contextlib.suppress(DeviceUnreachable):  # the device is gone; nothing more to stop
                self.stopped_by = (await self._conn.run(stop, timeout_s=3 * grace_s + 10)).text.strip()
        await self._release_forward()
        self.agent = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def drop_link(self) -> None:
        """Close the link and leave the agent running; the SSH connection and its forward stay for the next
        `open_agent`."""
        await self._close_transport()

    async def _ask_shutdown(self, timeout_s: float) -> bool:
        """Ask the agent to exit through the protocol (`shutdown` -> `bye`); True when it said bye."""
        from bench.agent import wire
        from bench.agent.transport import StreamTransport

        assert self.agent is not None
        try:
            transport = await StreamTransport.connect("127.0.0.1", self.agent.local_port, timeout=timeout_s)
        except DeviceUnreachable:
            return False
        try:
            await transport.send(wire.encode({"t": "shutdown", "id": 1}))
            async with asyncio.timeout(timeout_s):
                while line := await transport.readline():
                    if wire.is_message(line) and wire.decode(line).get("t") == "bye":
                        return True
        except (TimeoutError, DeviceUnreachable, wire.WireError):
            pass
        finally:
            await transport.close()
        return False

    async def _close_transport(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.close()

    async def _release_forward(self) -> None:
        if self.agent is not None and self._conn is not None and self._conn.connected:
            await self._conn.cancel_forward(self.agent.local_port)

    # -- telemetry ----------------------------------------------------------------------------------

    async def telemetry(self, interval_s: float | None = None) -> TelemetryMonitor:
        """A (not yet started) background telemetry monitor for this board."""
        source = self.device.settings.telemetry
        if interval_s is None:
            interval_s = self.device.settings.telemetry_interval_ms / 1000
        return TelemetryMonitor(await self.connection(), source, interval_s)

"""Driver for the Switch-style ARM64 console: the bench's image booted in QEMU (virt, Cortex-A57 x4, 4 GB).

Flash = make sure the image for the current recipe is built, with the device's model in front of it when that is
not the image's own (bench.devices.console_model). open_agent() boots the guest with the agent's
settings as kernel args, waits until the agent answers hello on its forwarded TCP port, and hands back
that transport. close_agent() shuts the guest down and always kills QEMU; drop_link() closes only the link, and
the next open_agent() reaches the same agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from bench.config.fleet import Device, QemuLink
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.lifecycle import release
from bench.core.paths import default_log_dir
from bench.devices.base import Driver, Progress, StepResult, no_progress
from bench.devices.console_model import device_model, initrd_for
from bench.devices.qemu_machine import BOOT_TIMEOUT_S, GUEST_AGENT_PORT, GuestFault, QemuMachine
from bench.image.build import KERNEL_NAME, BuiltImage, build_image, cached_image
from bench.links.probe_result import ProbeResult
from bench.power.protocol import PowerDriver, PowerError
from bench.power.qmp import QmpPower, qmp

SLIRP_HOST = "10.0.2.2"
PORT_ATTEMPTS = 3  # free ports are picked before QEMU binds them: another process may take one meanwhile
HELLO_RETRY_S = 0.1  # between hello probes while the guest agent starts: slirp accepts before it listens


def resolve_image(device: Device) -> tuple[Path, Path, str]:
    """(kernel, initrd, base cmdline) for the device: its link's image folder, or the cached build."""
    link = device.link
    if not isinstance(link, QemuLink):
        raise ConfigError(f"device {device.name!r}: a {device.kind} device needs a [device.qemu] link")
    if link.image is None:
        image = cached_image(device.kind)
        if image is None:
            raise DeviceUnreachable(
                f"{device.name}: the {device.kind} image is not built for the current recipe",
                hint=f"run: hilbench image build {device.kind}",
            )
        return image.kernel, image.initrd, image.cmdline
    folder = link.image if link.image.is_dir() else link.image.parent
    kernel, initrd = folder / KERNEL_NAME, folder / "initrd.img"
    if not kernel.is_file() or not initrd.is_file():
        raise ConfigError(
            f"device {device.name!r}: qemu field 'image': {link.image} has no {KERNEL_NAME} and initrd.img",
            hint="point it at a folder made by `hilbench image build`, or leave it out to use the cached build",
        )
    manifest = folder / "image.json"
    cmdline = "console=ttyAMA0 panic=-1 quiet"
    if manifest.is_file():
        cmdline = json.loads(manifest.read_text(encoding="utf-8")).get("cmdline", cmdline)
    return kernel, initrd, cmdline


class QemuArm64Driver(Driver):
    """Boots and runs the agent on a switch-arm64 device. `mode`: agent, selftest or idle (control only)."""

    def __init__(
        self,
        device: Device,
        log_dir: Path | None = None,
        *,
        mode: str = "agent",
        boot_args: dict[str, str] | None = None,
        boot_timeout: float = BOOT_TIMEOUT_S,
    ) -> None:
        super().__init__(device, log_dir)
        if not isinstance(device.link, QemuLink):
            raise ConfigError(f"device {device.name!r}: a {device.kind} device needs a [device.qemu] link")
        self.link: QemuLink = device.link
        self.mode = mode
        self.boot_args = dict(boot_args or {})
        self.boot_timeout = boot_timeout
        self.machine: QemuMachine | None = None
        self.transport = None
        self.boot_s: float | None = None  # QEMU start -> agent answering hello (or selftest done)
        self._console_followers: list[Callable[[str], None]] = []  # passed on to every machine booted

    async def probe(self, timeout_s: float) -> ProbeResult:
        """QEMU and the image: the fleet's, or the one built from the kind's recipe in the bench cache."""
        result = await super().probe(timeout_s)
        if not result.reachable or self.link.image is not None:
            return result
        binary = result.detail.split(";")[0]
        image = cached_image(self.device.kind)
        if image is None:  # the bench builds it itself (flash stage, `hilbench image build`): still usable
            return ProbeResult(True, f"{binary}; image not built yet (`hilbench flash` builds it)")
        return ProbeResult(True, f"{binary}, built image {image.folder} ({self.link.timing})")

    @property
    def host_address(self) -> str:
        """How the guest reaches the bench host: QEMU user-mode networking shows the host's 127.0.0.1 as
        10.0.2.2 (whatever the kind's `ota_server_host` says). Use it in OTA URLs."""
        return SLIRP_HOST

    @property
    def timing(self) -> str:
        """'realtime' (plain TCG) or 'icount' (-icount shift=0: deterministic); label every figure with it."""
        return self.link.timing

    def platform(self) -> dict[str, object]:
        """How the figures from this device were produced."""
        link = self.link
        return {
            "emulator": "qemu-tcg",
            "timing": link.timing,
            "machine": link.machine,
            "cpu": link.cpu,
            "smp": link.smp,
            "memory_mb": link.memory_mb,
        }

    def kernel_args(self) -> dict[str, str]:
        """The npc_* settings /init reads from the kernel command line."""
        args = {
            "npc_mode": self.mode,
            "npc_port": str(GUEST_AGENT_PORT),
            "npc_mem_mb": str(self.device.settings.memory_limit_mb),
            "npc_timing": self.link.timing,
        }
        energy = self.device.energy
        if energy is not None and energy.driver == "supply":  # its lab supply meter's readings (bench.energy.supply)
            args["npc_supply_ms"] = str(energy.settings.interval_ms)  # type: ignore[union-attr]
        args.update(self.boot_args)
        return args

    def fault(self) -> str | None:
        """Why the guest or its agent failed (panic, OOM, agent exit, QEMU gone), in one sentence; None if
        it did not. Call it when the agent link ends unexpectedly."""
        return self.machine.fault() if self.machine is not None else None

    async def flash(self, progress: Progress = no_progress) -> list[StepResult]:
        """Build the image if the recipe changed (a fleet link with its own image is used as given), then put the
        device's model on it (bench.devices.console_model: what the next boot runs)."""
        started = time.monotonic()
        if self.link.image is not None:  # checked by resolve_image below
            steps = [StepResult("image", ok=True, detail=f"given: {self.link.image}", skipped=True)]
        else:
            image: BuiltImage = await asyncio.to_thread(build_image, self.device.kind, progress=progress)
            steps = [
                StepResult(
                    "image",
                    ok=True,
                    detail=str(image.folder),
                    skipped=not image.built,
                    seconds=time.monotonic() - started,
                    figures={"initrd_bytes": image.initrd_bytes, "kernel_bytes": image.kernel_bytes},
                )
            ]
        started = time.monotonic()
        initrd = resolve_image(self.device)[1]
        booted = await asyncio.to_thread(initrd_for, self.device, initrd)
        model = device_model(self.device).name
        detail = f"{model} (the image's)" if booted == initrd else f"{model} in front of the image: {booted}"
        steps.append(StepResult("model", ok=True, detail=detail, skipped=booted == initrd,
                                seconds=time.monotonic() - started))  # fmt: skip
        return steps

    async def boot(self) -> QemuMachine:
        """Start QEMU and wait for the guest's network and control channel (`net-up`)."""
        kernel, initrd, cmdline = resolve_image(self.device)
        initrd = await asyncio.to_thread(initrd_for, self.device, initrd)
        cmdline = " ".join([cmdline, *(f"{k}={v}" for k, v in self.kernel_args().items())])
        log = (self.log_dir or default_log_dir()) / f"{self.device.name}.console.log"
        attempt = 0
        while True:
            attempt += 1
            machine = QemuMachine(self.device.name, self.link, kernel, initrd, cmdline, log)
            machine.listeners = self._console_followers
            self.machine = machine
            await machine.start()
            try:
                await machine.wait_for("net-up", self.boot_timeout)
                return machine
            except GuestFault:
                await machine.stop(grace=1.0)
                if not machine.status.port_taken or attempt >= PORT_ATTEMPTS:
                    raise

    async def open_agent(self):
        """Boot (if not running) and return the TCP line transport of the agent that answered hello."""
        if self.transport is not None:
            return self.transport
        machine = self.machine if self.machine and self.machine.running else await self.boot()
        await machine.wait_for("agent-start", self.boot_timeout)
        self.transport = await self._await_agent(machine)
        self.boot_s = (time.monotonic_ns() - machine.started_ns) / 1e9
        return self.transport

    async def _await_agent(self, machine: QemuMachine):
        """Connect through the forwarded port until the agent answers a hello (slirp accepts early)."""
        import zlib

        from bench.agent.transport import StreamTransport

        body = b'{"id":0,"t":"hello"}'
        probe = b"~" + body + b"*%08x\n" % zlib.crc32(body)
        deadline = time.monotonic() + self.boot_timeout
        while time.monotonic() < deadline:
            if (fault := machine.fault()) is not None or not machine.running:
                raise GuestFault(fault or f"{self.device.name}: QEMU stopped ({machine.exit_text()})")
            try:
                transport = await StreamTransport.connect("127.0.0.1", machine.agent_port, timeout=5.0)
            except DeviceUnreachable:
                await asyncio.sleep(HELLO_RETRY_S)
                continue
            try:
                await transport.send(probe)
                while line := await asyncio.wait_for(transport.readline(), 30.0):
                    if line.startswith(b"~") and b'"hello"' in line:
                        return transport
            except (TimeoutError, DeviceUnreachable):
                pass
            await transport.close()
            await asyncio.sleep(HELLO_RETRY_S)
        raise GuestFault(f"{self.device.name}: the agent did not answer on its port within {self.boot_timeout:g} s")

    async def selftest(self) -> dict[str, object]:
        """Boot with npc_mode=selftest: versions of python3/numpy/tflite-runtime in the guest and the
        factory model's invoke times (us); the guest powers off after it."""
        self.mode = "selftest"
        machine = await self.boot()
        exit_ = await machine.wait_for("agent-exit", self.boot_timeout)
        if (fault := machine.fault()) is not None or machine.status.selftest is None:
            raise GuestFault(fault or f"{self.device.name}: self-test printed no result (exit {exit_.get('rc')})")
        self.boot_s = (machine.ready_ns["agent-exit"] - machine.started_ns) / 1e9
        await machine.wait_exit(30.0)
        return json.loads(machine.status.selftest)

    async def hard_reset(self) -> None:
        """The machine's reset (QMP `system_reset`, then `cont` for a paused one). With -no-reboot QEMU leaves
        instead of rebooting; the next `open_agent` boots it again."""
        machine = self.machine
        if machine is None or not machine.running:
            return
        if self.transport is not None:
            await self.transport.close()
            self.transport = None
        with contextlib.suppress(PowerError):
            await qmp(machine.qmp_path, "system_reset")
            await qmp(machine.qmp_path, "cont")
        await machine.wait_exit(5.0)

    def machine_power(self) -> PowerDriver:
        """The machine's own supply (QMP quit, boot), for the recovery ladder's power cycle."""
        return QmpPower(self.device.name, self._qmp_socket, self.boot)

    def _qmp_socket(self) -> Path | None:
        return self.machine.qmp_path if self.machine is not None and self.machine.running else None

    async def follow_console(self, emit: Callable[[str], None]) -> None:
        """The guest's serial console (kernel, /init and the agent's stderr), this boot and the next ones."""
        self._console_followers.append(emit)
        try:
            await asyncio.Event().wait()
        finally:
            self._console_followers.remove(emit)

    def agent_sources(self) -> dict[str, Path]:
        """The host agent's files, flat in the image's agent folder."""
        from bench.bundles import host_agent_sources

        return host_agent_sources()

    async def drop_link(self) -> None:
        """Close the agent link; the guest and its agent keep running for the next `open_agent`."""
        await release(self, "transport")

    async def close_agent(self) -> None:
        """Close the agent link and shut the guest down (QEMU is killed if it does not stop)."""
        await release(self, "transport")
        if self.machine is not None:
            await self.machine.stop()

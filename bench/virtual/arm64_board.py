"""A virtual Jetson or Pi 5 as an aarch64 guest: a QEMU `virt` machine with the board's core (profile
`guest_cpu`) whose storage is a disk file, booting whatever OS that storage holds, reached through the
guest's own sshd on a forwarded loopback port.

It is provisioned like a real board: its `controls()` give the bench a power switch (QEMU started or
killed: a power cut, not a shutdown) and its storage (the disk file, written with bmaptool while the
board is off). Its boot firmware reads /boot/vmlinuz, /boot/initrd.img and /boot/cmdline.txt from the
disk (`debugfs`, read-only), as a Pi's firmware reads its boot partition; a blank or damaged disk does
not boot, and the board then simply never answers on SSH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from bench.config.fleet import Device, QemuLink, SshLink
from bench.core.errors import BenchError, ConfigError
from bench.core.folders import copy_file, open_append
from bench.core.logcap import CappedLog
from bench.core.paths import KEYS_DIR
from bench.devices.qemu_machine import BOOT_TIMEOUT_S, GuestFault, QemuMachine
from bench.energy.spec import modelled_from
from bench.image.disk import BOOT_CMDLINE, BOOT_INITRD, BOOT_KERNEL
from bench.links.ssh import free_local_port
from bench.provision.controls import BoardControls

if TYPE_CHECKING:
    from bench.virtual.linux import LinuxProfile

LOGIN_KEY = KEYS_DIR / "dev-board-login_ed25519"  # root's authorized key in the bench's own board images
HOST_KEY = KEYS_DIR / "dev-board-host_ed25519.pub"  # the host key those images carry


class VirtualArm64Board:
    """One virtual Linux board: QEMU + a disk file. `start()` powers it on (it boots if its disk holds an OS)
    and returns the SSH link; `controls()` is what provisioning uses."""

    def __init__(self, device: Device, state: Path, profile: LinuxProfile) -> None:
        self.device = device
        self.profile = profile
        self.state = state
        self.disk = state / "storage.img"
        self.qemu = QemuLink(image=None, timing=profile.guest_timing, smp=self.profile.guest_smp,
                             memory_mb=self.profile.guest_memory_mb, cpu=self.profile.guest_cpu)  # fmt: skip
        self.ssh_port: int | None = None
        self.machine: QemuMachine | None = None
        self.boot_error = ""  # why the last power-on did not boot ("" when it did)
        self._corrupt_at: int | None = None
        self._corrupt_len = 0

    @property
    def key(self) -> Path:
        """The bench's login key, with the permissions ssh insists on."""
        return self.state / "login_ed25519"

    @property
    def console_log(self) -> Path:
        """The guest's serial console, timestamped (appended across boots)."""
        return self.state / "console.log"

    async def start(self) -> SshLink:
        """Create the (blank) storage if new, power the board on, return its SSH link."""
        self.state.mkdir(parents=True, exist_ok=True)
        copy_file(LOGIN_KEY, self.key, what="state folder", mode=0o600)
        open_append(self.disk, what="state folder", binary=True).close()  # made blank when new
        self.ssh_port = free_local_port()
        await self.on()
        if self.machine is not None:  # like a board already running when the bench starts: wait for its boot
            with contextlib.suppress(GuestFault):
                await self.machine.wait_for("sshd-up", BOOT_TIMEOUT_S)
        return self.link()

    def link(self) -> SshLink:
        """How the bench reaches the guest's sshd."""
        if self.ssh_port is None:
            raise BenchError(f"virtual {self.device.name} is not running")
        return SshLink(user="root", host="127.0.0.1", port=self.ssh_port, key=self.key,
                       host_key=" ".join(HOST_KEY.read_text().split()[:2]))  # fmt: skip

    @property
    def meter_modelled(self) -> str:
        """What its stand-in sensors' power is modelled from: the guest's busy time per core, counted under icount."""
        time = "counted time" if self.profile.guest_timing == "icount" else "the guest's CPU time"
        return modelled_from(f"{time} and {self.profile.power_source}")

    def urls(self) -> dict[str, str]:
        """Every way to reach it."""
        urls = {"ssh": f"ssh://root@127.0.0.1:{self.ssh_port}", "storage": str(self.disk)}
        return urls if self.ssh_port else {}

    def controls(self) -> BoardControls:
        """Its power switch and storage, for provisioning."""
        return BoardControls(power=self, storage=_Storage(self))

    @property
    def powered(self) -> bool:
        """QEMU is running."""
        return self.machine is not None and self.machine.running

    async def on(self) -> None:
        """Power on: the boot firmware loads the kernel from the disk and QEMU starts. A disk without a
        bootable /boot leaves the board dark (`boot_error` says why); that is not an error here."""
        if self.powered:
            return
        boot = self.state / "boot"
        self.boot_error = await asyncio.to_thread(_read_boot_files, self.disk, boot)
        if self.boot_error:
            with CappedLog(self.console_log, what="state folder") as log:
                log.write(f"# power on: no boot: {self.boot_error}\n")
            return
        # The board's boot firmware adds what it knows of the machine to the kernel command line, as a Pi's
        # firmware does: here the emulated clock, which the agent reports in its hello (icount: guest time).
        cmdline = (boot / "cmdline.txt").read_text(encoding="utf-8").strip() + f" npc_timing={self.qemu.timing}"
        self.machine = QemuMachine(self.device.name, self.qemu, boot / "vmlinuz", boot / "initrd.img", cmdline,
                                   self.console_log, ssh_port=self.ssh_port, disk=self.disk)  # fmt: skip
        await self.machine.start()

    async def off(self) -> None:
        """Cut the power: QEMU's process group is killed (no shutdown, like pulling the plug)."""
        machine, self.machine = self.machine, None
        if machine is not None:
            machine.kill()
            await machine.wait_exit(10)
            with contextlib.suppress(Exception):
                await machine.stop(grace=1)

    async def stop(self) -> None:
        """Shut the guest down cleanly (its control port; SIGTERM, then SIGKILL if it does not), release the port."""
        machine, self.machine = self.machine, None
        if machine is not None:
            await machine.stop(grace=15)
        self.ssh_port = None

    def corrupt_next_write(self, offset: int, length: int = 64) -> None:
        """Fault injection: the next write to the storage lands with `length` bytes at `offset` flipped
        (a flaky card or reader), as seen when the data is read back."""
        self._corrupt_at = offset
        self._corrupt_len = length

    def after_write(self) -> None:
        """What the storage holds once a write settled: the injected fault, if one is pending."""
        if self._corrupt_at is None:
            return
        with self.disk.open("r+b") as fh:
            fh.seek(self._corrupt_at)
            data = fh.read(self._corrupt_len)
            fh.seek(self._corrupt_at)
            fh.write(bytes(b ^ 0xFF for b in data))
        self._corrupt_at = None


class _Storage:
    """The virtual board's storage as the bench host sees it: its disk file (only while the board is off)."""

    def __init__(self, board: VirtualArm64Board) -> None:
        self.board = board

    async def to_host(self) -> Path:
        if self.board.powered:
            raise BenchError(f"{self.board.device.name}: the storage is in use by the running board; power it off")
        return self.board.disk

    async def settle(self) -> None:
        await asyncio.to_thread(os.sync)
        self.board.after_write()

    async def to_board(self) -> None:
        return None


def _read_boot_files(disk: Path, boot: Path) -> str:
    """Copy the kernel, initrd and command line out of the disk's ext4 /boot; "" or why the disk cannot boot."""
    if not disk.is_file() or disk.stat().st_size == 0:
        return "the storage is blank"
    if shutil.which("debugfs") is None:
        raise ConfigError("debugfs is not installed", hint="apt-get install e2fsprogs")
    boot.mkdir(parents=True, exist_ok=True)
    for src, name in ((BOOT_KERNEL, "vmlinuz"), (BOOT_INITRD, "initrd.img"), (BOOT_CMDLINE, "cmdline.txt")):
        dest = boot / name
        dest.unlink(missing_ok=True)
        proc = subprocess.run(["debugfs", "-R", f"dump /{src} {dest}", str(disk)], capture_output=True, text=True)
        if not dest.is_file() or dest.stat().st_size == 0:
            why = (proc.stderr.strip().splitlines() or ["no such file"])[-1]
            return f"no /{src} on the storage ({why})"
    return ""

"""Virtual Linux devices (Jetson Orin NX, Raspberry Pi 5): a real OpenSSH `sshd` per device.

Each device gets, under `state_dir()/NAME`: generated host and user keys (kept across runs so the
pinned host key stays valid), an sshd config that allows key-only login for the current user on a
free loopback port, and its own root folder: `home/` (the device's $HOME, where the bench deploys),
`bin/` (first on the device's PATH: `python3` with the tflite runtime, and the board's telemetry
tools: `tegrastats` on a Jetson, `vcgencmd` on a Pi) and `sys/` (sysfs thermal-zone and cpufreq
files for a Pi, refreshed from this machine's /proc data while the device runs).

The bench reaches it exactly like a real board: `start()` returns an `SshLink` with the host key pinned.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import shutil
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.config.fleet import Device, SshLink
from bench.core.errors import BenchError, ConfigError
from bench.core.folders import copy_file, write_file
from bench.core.lifecycle import cancel
from bench.core.logcap import open_for_child
from bench.core.procs import DIE_WITH_BENCH, stop_process
from bench.core.reaper import processes_in
from bench.energy.spec import modelled_from
from bench.links.ssh import free_local_port
from bench.virtual.arm64_board import VirtualArm64Board
from bench.virtual.control import control_url, new_token, serve_control

BOARD_FOLDER = "virtual board folder"  # what an UnsafeFolder names

SSHD = "/usr/sbin/sshd"
TOOLS = Path(__file__).resolve().parent / "linux_tools"
_START_ATTEMPTS = 5


@dataclass(frozen=True)
class LinuxProfile:
    """What a virtual Linux device looks like: its size, its telemetry tools, and how warm it runs.

    There are no thermal sensors or power rails on the machine hosting virtual devices, so
    temperature (and Jetson rail power) is modelled as idle + coefficient x measured CPU load."""

    telemetry: str  # "tegrastats" (Jetson) or "sysfs-vcgencmd" (Pi)
    cpus: int
    cpu_max_mhz: int
    idle_c: float
    c_per_load: float
    zones: tuple[tuple[str, float], ...]  # name, offset from the modelled temperature
    # Its power (the stand-in sensors: bench/virtual/linux_tools/rails, tegrastats): idle, and above idle with every
    # one of its `cpus` cores loaded; each busy guest core draws one loaded core's share (docs/lab-control.md)
    idle_mw: int = 0
    mw_per_load: int = 0
    power_source: str = ""  # where those figures come from, named beside every figure they give
    # As a QEMU guest (bench.virtual.arm64_board): the core QEMU 7.2 models closest to the board's, and
    # the guest's size (kept small: the bundled fleet runs three aarch64 guests on a 2-core host).
    guest_cpu: str = "cortex-a76"
    guest_smp: int = 2
    guest_memory_mb: int = 1024
    # icount (-icount shift=0): the guest's clock follows the instructions it runs, so a guest starved on a
    # shared host falls behind in wall time, not in its own frame schedule (realtime: plain TCG)
    guest_timing: str = "icount"


JETSON_ORIN_NX = LinuxProfile(
    telemetry="tegrastats",
    cpus=8,
    cpu_max_mhz=1984,
    idle_c=42.0,
    c_per_load=22.0,
    zones=(("cpu", 0.0), ("soc2", -1.2), ("soc0", -0.8), ("gpu", -1.5), ("tj", 0.4), ("soc1", -1.0)),
    # Orin NX 16GB: idle VDD_IN 4.6 W, as ARK Electronics measured one on the module's INA3221 (L4T R36.5,
    # ark_jetson_kernel docs/power.md); loaded: 25 W, the module's budget (NVIDIA DS-10712-001 Table 5-2: VDD_IN
    # at most 5 A, at 5 V), a ceiling rather than a measured draw of its 8 cores
    idle_mw=4600,
    mw_per_load=20400,
    power_source="an Orin NX 16GB's measured 4.6 W idle (ARK Electronics) and 25 W budget (NVIDIA DS-10712-001)",
    # Orin's Cortex-A78AE is not in QEMU 7.2; its nearest there is the Cortex-A76: the A78's direct
    # predecessor with the same Armv8.2-A feature set (LSE atomics, fp16, dot product, RCpc).
    guest_cpu="cortex-a76",
)
PI5 = LinuxProfile(
    telemetry="sysfs-vcgencmd",
    cpus=4,
    cpu_max_mhz=2400,
    idle_c=48.0,
    c_per_load=30.0,
    zones=(("cpu-thermal", 0.0),),
    # the PMIC's rails at idle as a Pi 5 printed them (firmware 2024-09: 1.6 W); loaded: 1.8 W idle -> 7.9 W
    # running Geekbench at the wall (geerlingguy/sbc-reviews#21), +6.1 W over the 4 cores
    idle_mw=1605,
    mw_per_load=6100,
    power_source="a Pi 5's idle PMIC rails and its +6.1 W under load (geerlingguy/sbc-reviews#21)",
    guest_cpu="cortex-a76",  # the Pi 5's own core (BCM2712: 4x Cortex-A76)
)


class VirtualLinuxDevice:
    """One virtual Jetson or Pi: a real sshd on 127.0.0.1 in front of its own root folder."""

    def __init__(self, device: Device, state: Path, profile: LinuxProfile) -> None:
        self.device = device
        self.profile = profile
        self.state = state
        self.root = state / "root"
        self.port: int | None = None
        self._sshd: asyncio.subprocess.Process | None = None
        self._reaper: asyncio.subprocess.Process | None = None
        self._sysfs_task: asyncio.Task | None = None
        self._control: asyncio.Server | None = None
        self._control_token = new_token()  # only the bench powers the board (bench.virtual.control)
        self.powered = False

    # -- layout -------------------------------------------------------------------------------------

    @property
    def user_key(self) -> Path:
        """The private key the bench logs in with."""
        return self.state / "id_ed25519"

    @property
    def host_key_file(self) -> Path:
        """sshd's private host key."""
        return self.state / "ssh_host_ed25519_key"

    def host_key(self) -> str:
        """The public host key as pinned in a fleet file (`ssh-ed25519 AAAA...`)."""
        parts = (self.host_key_file.with_suffix(".pub")).read_text().split()
        return f"{parts[0]} {parts[1]}"

    async def _keygen(self, path: Path, comment: str) -> None:
        if path.exists() and path.with_suffix(".pub").exists():
            return
        proc = await asyncio.create_subprocess_exec(
            "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise BenchError(f"virtual {self.device.name}: ssh-keygen failed: {err.decode().strip()}")

    def _write_root(self) -> None:
        for sub in ("bin", "home", "sys"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        python = self.root / "bin" / "python3"
        write_file(python, f'#!/bin/sh\nexec {sys.executable} "$@"\n', what=BOARD_FOLDER, mode=0o755)
        tool = "tegrastats" if self.profile.telemetry == "tegrastats" else "vcgencmd"
        for name in (tool, "rails"):  # rails: the power rails' model both stand-ins read (linux_tools/rails)
            copy_file(TOOLS / name, self.root / "bin" / name, what=BOARD_FOLDER, mode=0o755)
        # one key a line, as the images' profile.json: the rails' shell model reads it with `read`
        write_file(self.root / "profile.json", json.dumps(asdict(self.profile), indent=1), what=BOARD_FOLDER)
        if self.profile.telemetry == "sysfs-vcgencmd":
            zone = self.root / "sys/class/thermal/thermal_zone0"
            zone.mkdir(parents=True, exist_ok=True)
            write_file(zone / "type", "cpu-thermal\n", what=BOARD_FOLDER)
            for n in range(self.profile.cpus):
                freq = self.root / f"sys/devices/system/cpu/cpu{n}/cpufreq"
                freq.mkdir(parents=True, exist_ok=True)
                write_file(freq / "scaling_max_freq", f"{self.profile.cpu_max_mhz * 1000}\n", what=BOARD_FOLDER)
            _refresh_sysfs(self.root, self.profile, _cpu_times(), _cpu_times())
            throttled = self.root / "throttled"
            if not throttled.exists():
                write_file(throttled, "0x0\n", what=BOARD_FOLDER)

    def _sshd_config(self, port: int) -> Path:
        path_env = f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
        board = f"HILBENCH_SYSFS={self.root / 'sys'} HILBENCH_VIRTUAL={self.root} HILBENCH_RUN={self.root / 'run'}"
        config = f"""# generated by bench.virtual.linux for {self.device.name}
ListenAddress 127.0.0.1:{port}
HostKey {self.host_key_file}
PidFile {self.state / "sshd.pid"}
AuthorizedKeysFile {self.state / "authorized_keys"}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowTcpForwarding local
GatewayPorts no
X11Forwarding no
PrintMotd no
PrintLastLog no
MaxSessions 64
MaxStartups 64
SetEnv HOME={self.root / "home"} PATH={path_env} {board}
Subsystem sftp internal-sftp
"""
        path = self.state / "sshd_config"
        write_file(path, config, what=BOARD_FOLDER)
        return path

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> SshLink:
        """Generate keys and folders, start sshd on a free loopback port; return the pinned SshLink."""
        if shutil.which("ssh-keygen") is None or not Path(SSHD).exists():
            raise ConfigError(
                f"virtual {self.device.name}: OpenSSH server not installed",
                hint="apt-get install openssh-server openssh-client",
            )
        self.state.mkdir(parents=True, exist_ok=True)
        await self._keygen(self.host_key_file, f"{self.device.name}-host")
        await self._keygen(self.user_key, f"hilbench@{self.device.name}")
        copy_file(self.user_key.with_suffix(".pub"), self.state / "authorized_keys", what=BOARD_FOLDER)
        self._write_root()
        # not tied: it outlives the bench by a moment to kill the board's detached agents (even on SIGKILL)
        self._reaper = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.core.reaper", str(self.root), stdin=asyncio.subprocess.PIPE
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation folder
        last = ""
        for _attempt in range(_START_ATTEMPTS):
            port = free_local_port()
            last = await self._start_sshd(port)
            if not last:
                self.port = port
                break
        else:
            raise BenchError(f"virtual {self.device.name}: sshd did not start: {last}")
        self._boot_services()
        self._control = await serve_control(self._handle, self._control_token)
        return self.link()

    def _boot_services(self) -> None:
        self.powered = True
        if self.profile.telemetry == "sysfs-vcgencmd":
            self._sysfs_task = asyncio.create_task(self._sysfs_loop())

    async def _start_sshd(self, port: int) -> str:
        """Start sshd on `port`; return "" when it answers, else its error text."""
        log = self.state / "sshd.log"
        os.close(open_for_child(log, what=BOARD_FOLDER))  # sshd appends to it itself: capped at each start
        self._sshd = await asyncio.create_subprocess_exec(
            *DIE_WITH_BENCH, SSHD, "-D", "-f", str(self._sshd_config(port)), "-E", str(log),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            if self._sshd.returncode is not None:
                break
            with contextlib.suppress(OSError):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                banner = await asyncio.wait_for(reader.readline(), 2)
                writer.close()
                if banner.startswith(b"SSH-"):
                    return ""
            await asyncio.sleep(0.02)
        await self._stop_sshd()
        text = log.read_text(errors="replace").strip() if log.exists() else ""
        return text.splitlines()[-1] if text else f"no SSH banner on port {port}"

    def link(self) -> SshLink:
        """How the bench reaches this device while it runs."""
        if self.port is None:
            raise BenchError(f"virtual {self.device.name} is not running")
        return SshLink(
            user=getpass.getuser(), host="127.0.0.1", port=self.port, key=self.user_key, host_key=self.host_key()
        )

    @property
    def meter_modelled(self) -> str:
        """What its stand-in sensors' power is modelled from (this host's CPU load: a loopback board is not counted)."""
        return modelled_from(f"the bench host's CPU load and {self.profile.power_source}")

    def urls(self) -> dict[str, str]:
        """Every way to reach the device: ssh, and its control API (power, hang)."""
        urls = {"ssh": f"ssh://{getpass.getuser()}@127.0.0.1:{self.port}"} if self.port else {}
        if self._control is not None:
            urls["control"] = control_url(self._control, self._control_token)
        return urls

    async def stop(self) -> None:
        """Power off for good: stop the control API too, and forget the port."""
        if self._control is not None:
            self._control.close()
            self._control = None
        await self.power_off()
        await stop_process(self._reaper, 3)
        self._reaper = None
        self.port = None

    async def power_off(self) -> None:
        """Cut the supply: sshd, its sessions and every process running from the device's folder die at once."""
        task, self._sysfs_task = self._sysfs_task, None
        await cancel(task)
        self.drop_connections()
        if self._sshd is not None and self._sshd.returncode is None:
            self._sshd.kill()  # no clean shutdown without power (also when it was stopped by a hang)
        await self._stop_sshd()
        for pid in processes_in(self.root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.powered = False

    async def power_on(self) -> None:
        """Apply power: the board boots and its sshd listens again on the same address (no agent runs)."""
        if self.powered:
            return
        if self.port is None:
            raise BenchError(f"virtual {self.device.name} was never started")
        error = await self._start_sshd(self.port)
        if error:
            raise BenchError(f"virtual {self.device.name}: sshd did not come back: {error}")
        self._boot_services()

    def hang(self) -> int:
        """Freeze the board (a kernel lock-up): sshd, its sessions and the device's processes stop (SIGSTOP)
        and answer nothing until a power cycle. Returns how many processes froze."""
        frozen = set(processes_in(self.root))
        if self._sshd is not None:
            frozen |= {self._sshd.pid, *_descendants(self._sshd.pid)}
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        return len(frozen)

    async def control(self, op: str) -> dict:
        """One control API request, in-process (the same handler the TCP API serves)."""
        return await self._handle({"op": op})

    async def _handle(self, request: dict) -> dict:
        op = request.get("op")
        try:
            if op == "power_off":
                await self.power_off()
            elif op == "power_on":
                await self.power_on()
            elif op == "power_cycle":
                await self.power_off()
                await self.power_on()
            elif op == "hang":
                return {"ok": True, "frozen": self.hang()}
            elif op != "status":
                return {"ok": False, "error": f"unknown op {op!r}; ops: power_off power_on power_cycle hang status"}
        except BenchError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "power": "on" if self.powered else "off"}

    async def _stop_sshd(self) -> None:
        proc, self._sshd = self._sshd, None
        await stop_process(proc, 3)

    # -- faults -------------------------------------------------------------------------------------

    def drop_connections(self) -> int:
        """Cut every open SSH connection, as a network outage would (sshd keeps listening): each
        connection's sshd processes and its sessions die at once. Returns how many connections were cut."""
        if self._sshd is None:
            return 0
        connections = [pid for pid, ppid in _process_parents() if ppid == self._sshd.pid]
        doomed = _descendants(self._sshd.pid)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(connections)

    def set_throttled(self, bits: int) -> None:
        """Set what the virtual Pi's `vcgencmd get_throttled` reports (firmware throttle bit field)."""
        write_file(self.root / "throttled", f"{bits:#x}\n", what=BOARD_FOLDER)

    async def _sysfs_loop(self, period_s: float = 0.5) -> None:
        before = _cpu_times()
        while True:
            await asyncio.sleep(period_s)
            after = _cpu_times()
            _refresh_sysfs(self.root, self.profile, before, after)
            before = after


def _cpu_times() -> tuple[int, int]:
    """(total, idle) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return sum(vals), vals[3] + vals[4]


def _cpu_mhz() -> int:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return int(float(line.split(":")[1]))
    return 0


def _refresh_sysfs(root: Path, profile: LinuxProfile, before: tuple[int, int], after: tuple[int, int]) -> None:
    """Write the Pi's thermal zone (modelled from the measured load) and cpufreq files (this machine's MHz)."""
    total = max(1, after[0] - before[0])
    load = max(0.0, min(1.0, 1 - (after[1] - before[1]) / total))
    milli_c = int((profile.idle_c + profile.c_per_load * load) * 1000)
    write_file(root / "sys/class/thermal/thermal_zone0/temp", f"{milli_c}\n", what=BOARD_FOLDER)
    khz = min(_cpu_mhz() or profile.cpu_max_mhz, profile.cpu_max_mhz) * 1000
    for n in range(profile.cpus):
        write_file(root / f"sys/devices/system/cpu/cpu{n}/cpufreq/scaling_cur_freq", f"{khz}\n", what=BOARD_FOLDER)


def _descendants(root_pid: int) -> set[int]:
    """Every process below `root_pid`."""
    parents = _process_parents()
    found = {pid for pid, ppid in parents if ppid == root_pid}
    grew = True
    while grew:
        more = {pid for pid, ppid in parents if ppid in found} - found
        grew = bool(more)
        found |= more
    return found


def _process_parents() -> list[tuple[int, int]]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                out.append((int(entry.name), int(stat.rsplit(")", 1)[1].split()[1])))
    return out


def linux_board(device: Device, state: Path, profile: LinuxProfile) -> VirtualLinuxDevice | VirtualArm64Board:
    """A virtual Linux board: an aarch64 QEMU guest when the fleet gives it an OS image to boot
    (`[device.os]`), else the faster loopback sshd (the bench host's own Python, x86_64)."""
    if device.os is not None:
        return VirtualArm64Board(device, state, profile)
    return VirtualLinuxDevice(device, state, profile)


def virtual_jetson(device: Device, state: Path) -> VirtualLinuxDevice | VirtualArm64Board:
    """A virtual Jetson Orin NX (the `virtual` of its kind registry entry)."""
    return linux_board(device, state, JETSON_ORIN_NX)


def virtual_pi5(device: Device, state: Path) -> VirtualLinuxDevice | VirtualArm64Board:
    """A virtual Raspberry Pi 5 (the `virtual` of its kind registry entry)."""
    return linux_board(device, state, PI5)

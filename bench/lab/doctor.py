"""`hilbench doctor`: is this bench host ready for the selected devices? Each missing thing with its fix.

The nightly's check stage runs `device_problems` for each device, so a missing program fails that device at
check, naming its package, instead of at flash.
"""

from __future__ import annotations

import base64
import grp
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.config.fleet import Device, Fleet
from bench.config.kinds import USB_SERIAL_JTAG, WEB_AGENT, Esp32c6Settings
from bench.config.os_spec import BUILD
from bench.core.errors import ConfigError
from bench.core.paths import DISTRIBUTION, WEB_DIR, cache_root
from bench.core.programs import Program, load_manifest, pip_fix, version_tuple
from bench.links.spec import QemuLink, SerialLink

OK, WARN, FAIL = "ok", "warn", "fail"
DISK_FREE_GB = {"os-build": 8.0, "any": 1.0}  # images and their build trees; the results store and reports
USB_SERIAL_JTAG_ID = "303a"  # Espressif's USB vendor id (the ESP32-C6's own USB-Serial-JTAG port: 303a:1001)
UDEV_DIRS = (Path("/etc/udev/rules.d"), Path("/lib/udev/rules.d"), Path("/usr/lib/udev/rules.d"))
REACH_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HostFinding:
    """One check: what was checked, its status (ok, warn, fail), what was found and the command that fixes it."""

    check: str
    status: str
    detail: str
    fix: str = ""
    devices: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def device_needs(device: Device) -> set[str]:
    """The manifest's `needed_by` conditions one device brings (docs in bench/core/programs.toml)."""
    needs = {"bench", f"kind:{device.kind}"}
    if device.virtual:
        needs.add(f"virtual:{device.kind}")
    machine = device.kind_info.link is QemuLink  # a QEMU machine the bench boots, from an image it builds unless given
    if machine or (device.virtual and device.os is not None):
        needs.add("qemu")
    if machine and (not isinstance(device.link, QemuLink) or device.link.image is None):
        needs.add("os-build")
    if device.os is not None:
        needs.add("os-image")
        if device.os.image is None or str(device.os.image) == BUILD:
            needs.update(("os-build", "disk-build"))
        if device.os.usbsdmux is not None:
            needs.add("usbsdmux")
    if device.power is not None:
        needs.add(f"power:{device.power.driver}")
    if device.lab is not None:
        needs.add("lab")
    return needs


def _needed(program: Program, needs: set[str]) -> bool:
    return any(n in needs for n in program.needed_by)


def _configured_program(program: Program, device: Device) -> str | None:
    """A path the fleet gives for this program instead of PATH (the virtual fleet's stand-in uhubctl)."""
    given = device.power.settings.programs().get(program.program) if device.power is not None else None
    if given is None:
        return None
    return str((device.power.base_dir / given).resolve()) if "/" in given else None


def check_program(program: Program, devices: list[Device], path: str | None = None) -> HostFinding:
    """Is `program` there (and new enough) for `devices`, the ones that need it."""
    names = tuple(d.name for d in devices)
    configured = {c for d in devices if (c := _configured_program(program, d))}
    if configured and all(Path(c).is_file() and os.access(c, os.X_OK) for c in configured):
        return HostFinding(f"program {program.program}", OK, ", ".join(sorted(configured)), devices=names)
    exe = program.find(path)
    if exe is None:
        need = ", ".join(program.needed_by)
        return HostFinding(f"program {program.program}", FAIL, f"{program.program} is not installed (needed by {need})",
                       program.fix, names)  # fmt: skip
    if program.min_version:
        found = program.version(exe)
        if found is None:
            return HostFinding(f"program {program.program}", WARN, f"{exe}: cannot read its version",
                           program.fix, names)  # fmt: skip
        if version_tuple(found) < version_tuple(program.min_version):
            return HostFinding(f"program {program.program}", FAIL,
                           f"{exe} is version {found}, the bench needs {program.min_version} or newer",
                           f"{program.fix} (from a newer release)", names)  # fmt: skip
        return HostFinding(f"program {program.program}", OK, f"{exe} {found}", devices=names)
    return HostFinding(f"program {program.program}", OK, exe, devices=names)


def device_problems(device: Device, path: str | None = None) -> list[HostFinding]:
    """The programs `device` needs that this host lacks (what the nightly's check stage fails it on)."""
    needs = device_needs(device)
    found = (check_program(p, [device], path) for p in load_manifest() if _needed(p, needs))
    return [f for f in found if f.status == FAIL]


def check_programs(devices: list[Device], path: str | None = None) -> list[HostFinding]:
    """Every manifest program: checked for the devices that need it; test-only ones are warnings."""
    findings = []
    for program in load_manifest():
        users = [d for d in devices if _needed(program, device_needs(d))]
        finding = check_program(program, users, path)
        if not users and program.needed_by != ("bench",):
            if finding.status != FAIL or not any(n == "setup" or n.startswith("tests:") for n in program.needed_by):
                continue  # nothing of this fleet needs it: a line only when the test suite or setup does
            finding = HostFinding(finding.check, WARN, finding.detail + " (not by this fleet)", finding.fix)
        findings.append(finding)
    return findings


def _record_hash(dist: str, member: str) -> str | None:
    for file in importlib.metadata.distribution(dist).files or []:
        if str(file) == member and file.hash is not None:
            return file.hash.value
    return None


def check_python() -> list[HostFinding]:
    """The interpreter, the bench's installed dependencies and which `serial` module wins."""
    findings = []
    version = ".".join(map(str, sys.version_info[:3]))
    ok = (3, 11) <= sys.version_info[:2] <= (3, 13)
    findings.append(HostFinding("python", OK if ok else FAIL, f"{sys.executable} {version}",
                            "" if ok else "PYTHON=python3.11 .ci/setup"))  # fmt: skip
    missing = []
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        requirements, missing = [], [f"{DISTRIBUTION} itself (not installed in this venv)"]
    for requirement in requirements:
        if "extra ==" in requirement:
            continue
        name = requirement.split(";")[0].split("[")[0]
        for sep in ("==", ">=", "<=", "~=", "<", ">"):
            name = name.split(sep)[0]
        try:
            importlib.metadata.version(name.strip())
        except importlib.metadata.PackageNotFoundError:
            missing.append(name.strip())
    findings.append(HostFinding("venv packages", FAIL if missing else OK,
                            f"missing: {', '.join(missing)}" if missing else "every dependency installed",
                            pip_fix() if missing else ""))  # fmt: skip
    findings.append(check_pyserial())
    return findings


def check_pyserial() -> HostFinding:
    """labgrid's pyserial-labgrid installs the module `serial` too (which one wins is install order); the bench
    wants plain pyserial's."""
    fix = f"{sys.executable} -m pip install --force-reinstall --no-deps pyserial==3.5"
    try:
        import serial
    except ImportError:
        return HostFinding("pyserial", FAIL, "no module `serial`", fix)
    try:
        want = _record_hash("pyserial", "serial/__init__.py")
    except importlib.metadata.PackageNotFoundError:
        return HostFinding("pyserial", FAIL, "pyserial is not installed (only a fork?)", fix)
    data = Path(serial.__file__).read_bytes()
    have = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if want is not None and have != want:
        return HostFinding(
            "pyserial", FAIL, f"{serial.__file__} is not pyserial's (labgrid's pyserial-labgrid won)", fix
        )
    return HostFinding("pyserial", OK, f"pyserial {importlib.metadata.version('pyserial')} ({serial.__file__})")


def require_pyserial() -> None:
    """At start-up of what touches devices (`hilbench`'s device commands, the pytest plugin): a ConfigError with
    the fix when the `serial` module is labgrid's fork, not pyserial."""
    finding = check_pyserial()
    if finding.status == FAIL:
        raise ConfigError(f"pyserial: {finding.detail}", hint=finding.fix)


def check_web(devices: list[Device]) -> HostFinding:
    """The web agent's locked npm packages in web/node_modules."""

    wanted = json.loads((WEB_DIR / "package.json").read_text(encoding="utf-8")).get("dependencies", {})
    absent = [n for n in wanted if not (WEB_DIR / "node_modules" / n / "package.json").is_file()]
    web = tuple(d.name for d in devices if d.kind_info.runtime == WEB_AGENT)
    if not absent:
        return HostFinding("web npm packages", OK, ", ".join(f"{n} {v}" for n, v in wanted.items()), devices=web)
    return HostFinding("web npm packages", FAIL if web else WARN, f"{WEB_DIR}/node_modules lacks {', '.join(absent)}",
                   f"cd {WEB_DIR} && npm ci", web)  # fmt: skip


def check_disk(devices: list[Device], reports: Path) -> list[HostFinding]:
    """Free space where images are cached and where results and reports go."""
    builds = any("os-build" in device_needs(d) for d in devices)
    findings = []
    for label, folder, need in (("image cache", cache_root(), DISK_FREE_GB["os-build"] if builds else 1.0),
                                ("results and reports", reports, DISK_FREE_GB["any"])):  # fmt: skip
        probe = folder
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        free = shutil.disk_usage(probe).free / 2**30
        ok = free >= need
        said = f"{folder}: {free:.1f} GB free (needs {need:g})"
        findings.append(HostFinding(f"disk: {label}", OK if ok else FAIL, said,
                                    "" if ok else f"free space on {probe} or set HILBENCH_CACHE_DIR"))  # fmt: skip
    return findings


def check_serial(devices: list[Device]) -> list[HostFinding]:
    """Real serial boards: the port can be opened by this user; USB-Serial-JTAG boards have a udev rule."""
    findings = []
    for device in devices:
        url = device.link.url if isinstance(device.link, SerialLink) else ""
        if device.virtual or not url.startswith("/dev/"):
            continue
        if not Path(url).exists():
            findings.append(HostFinding(f"serial {device.name}", FAIL, f"{url} does not exist (board unplugged?)",
                                    "hilbench fleet discover", (device.name,)))  # fmt: skip
        elif not os.access(url, os.R_OK | os.W_OK):
            group = grp.getgrgid(os.stat(url).st_gid).gr_name
            findings.append(HostFinding(f"serial {device.name}", FAIL, f"{url}: no read/write access for this user",
                                    f"sudo usermod -aG {group} $USER (then log in again)", (device.name,)))  # fmt: skip
        else:
            findings.append(HostFinding(f"serial {device.name}", OK, f"{url} read/write", devices=(device.name,)))
        jtag = isinstance(device.settings, Esp32c6Settings) and device.settings.usb == USB_SERIAL_JTAG
        if jtag and not _udev_rule_for(USB_SERIAL_JTAG_ID):
            no_rule = f"no udev rule for USB id {USB_SERIAL_JTAG_ID}:1001"
            findings.append(HostFinding(f"udev {device.name}", WARN, no_rule,
                                    'echo \'SUBSYSTEM=="tty", ATTRS{idVendor}=="303a", MODE="0660", GROUP="dialout"\' '
                                    "| sudo tee /etc/udev/rules.d/60-esp32-usb-jtag.rules && sudo udevadm trigger",
                                    (device.name,)))  # fmt: skip
    return findings


def _udev_rule_for(vendor: str) -> bool:
    for folder in UDEV_DIRS:
        for rule in folder.glob("*.rules") if folder.is_dir() else []:
            try:
                if vendor in rule.read_text(errors="replace").lower():
                    return True
            except OSError:
                continue
    return False


def check_kvm(devices: list[Device]) -> HostFinding | None:
    """/dev/kvm helps only aarch64 guests on an aarch64 host; elsewhere QEMU runs them under TCG."""
    guests = tuple(d.name for d in devices if "qemu" in device_needs(d))
    if not guests:
        return None
    if platform.machine() not in ("aarch64", "arm64"):
        return HostFinding("kvm", OK, f"n/a: a {platform.machine()} host runs aarch64 guests under TCG", devices=guests)
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        return HostFinding("kvm", OK, "/dev/kvm usable", devices=guests)
    return HostFinding("kvm", WARN, "/dev/kvm missing or not writable: the guests run under TCG (slower)",
                   "sudo usermod -aG kvm $USER", guests)  # fmt: skip


def _reachable(host: str, port: int) -> str | None:
    """None when a TCP connection opens, else why not."""
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def check_services(fleet: Fleet) -> list[HostFinding]:
    """The fleet's PostgreSQL results store and labgrid coordinator, when it names them."""
    findings = []
    results = fleet.bench.results
    if results.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg

            with psycopg.connect(results, connect_timeout=int(REACH_TIMEOUT_S)):
                pass
            findings.append(HostFinding("postgresql", OK, "results store answers"))
        except Exception as exc:
            findings.append(HostFinding("postgresql", FAIL, f"[bench] results: {str(exc).strip()[:200]}",
                                    "start the server or fix [bench] results in the fleet file"))  # fmt: skip
    coordinator = fleet.lab.coordinator
    if coordinator:
        host, _, port = coordinator.rpartition(":")
        why = _reachable(host.strip("[]"), int(port))
        findings.append(HostFinding("labgrid coordinator", FAIL if why else OK,
                                f"{coordinator}: {why}" if why else f"{coordinator} answers",
                                "start it: labgrid-coordinator (docs/lab.md)" if why else ""))  # fmt: skip
    return findings


def diagnose(fleet: Fleet, devices: list[Device], reports: Path, path: str | None = None) -> list[HostFinding]:
    """Every check for `devices` of `fleet`, in the order they are printed."""
    findings = [*check_programs(devices, path), *check_python(), check_web(devices), *check_disk(devices, reports)]
    findings += check_serial(devices)
    kvm = check_kvm(devices)
    if kvm is not None:
        findings.append(kvm)
    return findings + check_services(fleet)

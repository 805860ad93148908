"""The link types a fleet device is reached by (a serial port, SSH, a QEMU machine the bench boots), each
with its behaviour: how it is read from a fleet file, described, probed, how many bytes it carries, and
what a labgrid exporter publishes for it. Nothing else branches on a link's type."""

from __future__ import annotations

import asyncio
import re
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from bench.core.errors import ConfigError
from bench.core.fields import Declared, chosen, matching, not_option, ranged, resolve_path, settings_from
from bench.links.on_host import OnTheBenchHost
from bench.links.probe_result import ProbeResult

_SSH_RE = re.compile(r"(?P<user>[^@\s]+)@(?P<host>\[[^\]]+\]|[^:\s]+)(?::(?P<port>\d+))?")
_QEMU_TIMINGS = ("realtime", "icount")


DEFAULT_BAUD = 115200  # a serial link's speed when neither the fleet nor the kind sets one


@dataclass(frozen=True)
class LinkFields(Declared):
    """The link fields of a [[device]] table, each link type reading its own (`fields` says which a kind may
    give): a serial port and its baud rate (the kind's when absent), an SSH target with its key and host key, a
    browser's DevTools URL. A device in a lab place gives what its place's published link lacks: the login, the
    baud rate."""

    port: str | None = matching(
        None, r"(rfc2217://|socket://|loop://|/dev/).+", "is not a serial port: a /dev/... path or an rfc2217:// "
        "or socket:// URL"
    )  # fmt: skip
    baud: int | None = ranged(None, 300, 12_000_000)
    ssh: str | None = matching(None, _SSH_RE.pattern, "is not user@host[:port]")
    key: Path | None = None  # the private key the bench logs in with
    host_key: str | None = None  # the board's public host key, as in known_hosts ("ssh-ed25519 AAAA...")
    known_hosts: Path | None = None
    devtools: str | None = matching(None, r"wss?://.+", "is not a ws:// DevTools URL")


@dataclass(frozen=True)
class FleetEntry:
    """What a link parser needs to know about the [[device]] table it reads."""

    raw: dict[str, Any]
    where: str  # "FILE: device 'NAME'", for errors
    kind: str
    optional: bool  # virtual or in a lab place: the link may be missing (the bench finds it itself)
    base_dir: Path  # the fleet file's folder, for relative paths
    default_baud: int = DEFAULT_BAUD

    @cached_property
    def link(self) -> LinkFields:
        """The table's link fields, typed and checked (a ConfigError naming the field), paths taken from the
        fleet file's folder."""
        return settings_from(LinkFields, self.raw, self.where, adjust=lambda values: self.placed(values))

    def needed(self, value: str | None, name: str, hint: str) -> str | None:
        """The link field `name`'s `value`: None when it is not given and the link is optional, a ConfigError
        naming the field (and `hint`, how to give it) when it must be given."""
        if value is None and not self.optional:
            raise ConfigError(f"{self.where}: missing link: field {name!r}", hint=hint)
        return value

    def placed(self, values: dict[str, Any]) -> dict[str, Any]:
        """The `Path` values of typed fields taken from the fleet file's folder (`~` expanded)."""
        return {k: resolve_path(str(v), self.base_dir) for k, v in values.items() if isinstance(v, Path)}


@dataclass(frozen=True)
class SerialLink:
    """A serial port: a local device path or a pyserial URL (rfc2217://, socket://)."""

    family: ClassVar[str] = "serial"
    fields: ClassVar[frozenset[str]] = frozenset({"port", "baud", "mac", "usb_serial"})
    lab_classes: ClassVar[tuple[str, ...]] = ("NetworkSerialPort",)  # USBSerialPort/RawSerialPort publish as this

    url: str
    baud: int

    @classmethod
    def parse(cls, entry: FleetEntry) -> SerialLink | None:
        """The link of a fleet device (None when optional and not given)."""
        hint = 'give port = "/dev/ttyACM0", "rfc2217://host:port" or "socket://host:port", or set virtual = true'
        port = entry.needed(entry.link.port, "port", hint)
        return None if port is None else cls(url=port, baud=entry.link.baud or entry.default_baud)

    def describe(self) -> str:
        """The link as a person would write it."""
        return f"{self.url} @ {self.baud}"

    @property
    def bytes_per_s(self) -> float | None:
        """What the link carries: 8N1 is ten bit times per byte."""
        return self.baud / 10

    async def probe(self, kind: str, timeout_s: float) -> ProbeResult:
        """Does the port open (without talking to the agent)."""
        return await asyncio.wait_for(asyncio.to_thread(self._open_close), timeout_s)

    def _open_close(self) -> ProbeResult:
        import serial

        try:
            port = serial.serial_for_url(self.url, baudrate=self.baud, timeout=0.5, do_not_open=True)
            port.open()
            port.close()
        except (serial.SerialException, OSError, ValueError) as exc:
            return ProbeResult(False, f"{self.url}: {exc}")
        return ProbeResult(True, f"{self.url} opens")

    def lab_resource(self, address: str | None, baud: int) -> dict[str, Any]:
        """What a bench host's exporter publishes for this (served) link."""
        url = urlsplit(self.url)
        return {"NetworkSerialPort": {"host": address or url.hostname, "port": url.port, "speed": baud,
                                      "protocol": "rfc2217"}}  # fmt: skip

    @classmethod
    def lab_export(cls, device: Any, where: str, baud: int) -> dict[str, Any]:
        """What the exporter publishes for a real board on its bench host: a udev match on its USB serial."""
        usb_serial = device.usb_serial
        if not usb_serial:
            raise ConfigError(
                f"{where}: field 'usb_serial': missing",
                hint="give the board's USB serial number (udevadm info /dev/ttyACM0 | grep ID_SERIAL_SHORT)",
            )
        return {"USBSerialPort": {"match": {"ID_SERIAL_SHORT": str(usb_serial)}, "speed": baud}}

    @classmethod
    def from_lab(cls, device: Any, params: dict[str, Any]) -> SerialLink:
        """The link to `device` from the parameters of its place's published resource."""
        lab = device.lab
        baud = int((lab and lab.baud) or params.get("speed") or (lab.kind_baud if lab is not None else DEFAULT_BAUD))
        return cls(url=serial_url(params), baud=baud)


def serial_url(params: dict[str, Any]) -> str:
    """pyserial URL for a NetworkSerialPort (`ign_set_control`: ser2net does not answer line changes)."""
    host, port = params["host"], int(params["port"])
    if params.get("protocol", "rfc2217") == "raw":
        return f"socket://{host}:{port}"
    return f"rfc2217://{host}:{port}?ign_set_control"


@dataclass(frozen=True)
class SshLink:
    """An SSH endpoint with key authentication."""

    family: ClassVar[str] = "ssh"
    # `os`: the [device.os] table of a Linux board's OS image (bench.config.os_spec)
    fields: ClassVar[frozenset[str]] = frozenset({"ssh", "key", "host_key", "known_hosts", "python", "os"})
    lab_classes: ClassVar[tuple[str, ...]] = ("NetworkService",)

    user: str
    host: str
    port: int
    key: Path | None = None
    host_key: str | None = None
    known_hosts: Path | None = None

    @property
    def target(self) -> str:
        """`user@host:port` as written in the fleet file."""
        return f"{self.user}@{self.host}:{self.port}"

    @classmethod
    def parse(cls, entry: FleetEntry) -> SshLink | None:
        """The link of a fleet device (None when optional and not given)."""
        where, given = entry.where, entry.link
        target = entry.needed(given.ssh, "ssh", 'give ssh = "user@host:22" and key = "PATH"')
        if target is None:
            return None
        match = _SSH_RE.fullmatch(target)
        assert match is not None  # LinkFields checked the form
        if not 1 <= int(match["port"] or 22) <= 65535:
            raise ConfigError(f"{where}: field 'ssh': port {match['port']} is out of range (1 to 65535)")
        not_option(match["user"], f"{where}: field 'ssh': user")  # ssh would read "-oProxyCommand=..@host"
        not_option(match["host"].strip("[]"), f"{where}: field 'ssh': host")
        return cls(
            user=match["user"],
            host=match["host"].strip("[]"),
            port=int(match["port"] or 22),
            key=given.key,
            host_key=given.host_key,
            known_hosts=given.known_hosts,
        )

    def describe(self) -> str:
        """The link as a person would write it."""
        return f"ssh {self.target}"

    @property
    def bytes_per_s(self) -> float | None:
        """None: TCP is not the bottleneck."""
        return None

    async def probe(self, kind: str, timeout_s: float) -> ProbeResult:
        """Does the port answer with an SSH banner."""
        return await asyncio.wait_for(self._banner(), timeout_s)

    async def _banner(self) -> ProbeResult:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            return ProbeResult(False, f"{self.host}:{self.port}: {exc.strerror or exc}")
        try:
            banner = (await reader.readline()).decode("ascii", "replace").strip()
        finally:
            writer.close()
        if not banner.startswith("SSH-"):
            return ProbeResult(False, f"{self.host}:{self.port} answers but is not SSH ({banner[:40]!r})")
        return ProbeResult(True, f"{self.host}:{self.port} {banner}")

    def lab_resource(self, address: str | None, baud: int) -> dict[str, Any]:
        """What a bench host's exporter publishes for this (served) link."""
        return {"NetworkService": {"address": address or self.host, "username": self.user, "port": self.port}}

    @classmethod
    def lab_export(cls, device: Any, where: str, baud: int) -> dict[str, Any]:
        """What the exporter publishes for a real board: its SSH address as its bench host sees it."""
        local = device.lab.local if device.lab is not None else None
        if not isinstance(local, cls):
            raise ConfigError(
                f"{where}: field 'ssh': missing", hint='ssh = "user@address:22", as its bench host sees it'
            )
        return local.lab_resource(None, baud)

    @classmethod
    def from_lab(cls, device: Any, params: dict[str, Any]) -> SshLink:
        """The link to `device` from the parameters of its place's published resource."""
        return cls(
            user=params.get("username") or "root",
            host=params["address"],
            port=int(params.get("port", 22)),
            key=device.lab.key if device.lab is not None else None,
            host_key=device.lab.host_key if device.lab is not None else None,
            known_hosts=device.lab.known_hosts if device.lab is not None else None,
        )


@dataclass(frozen=True)
class QemuLink(OnTheBenchHost, Declared):
    """An emulated machine that the bench boots itself, declared by the device's [device.qemu] table."""

    what: ClassVar[str] = "a QEMU machine"

    family: ClassVar[str] = "qemu"
    fields: ClassVar[frozenset[str]] = frozenset({"qemu"})
    lab_classes: ClassVar[tuple[str, ...]] = ()  # runs on the bench host itself, never in a lab place

    image: Path | None = None  # None: the image built from the kind's recipe
    timing: str = chosen("realtime", _QEMU_TIMINGS)
    smp: int = ranged(4, 1, 512)
    memory_mb: int = ranged(4096, 64, 16 * 1024 * 1024)
    binary: str = "qemu-system-aarch64"
    machine: str = "virt"
    cpu: str = "cortex-a57"

    @classmethod
    def parse(cls, entry: FleetEntry) -> QemuLink:
        """The machine of a fleet device, from its [device.qemu] table (defaults when absent)."""
        qemu = entry.raw.get("qemu", {})
        if not isinstance(qemu, dict):
            raise ConfigError(f"{entry.where}: field 'qemu': must be a table ([device.qemu])")
        return settings_from(cls, qemu, entry.where, table="qemu", what="[device.qemu]", adjust=entry.placed)

    def describe(self) -> str:
        """The machine as a person would write it."""
        return f"qemu {self.machine}/{self.cpu} x{self.smp} {self.memory_mb} MB ({self.timing})"

    @property
    def bytes_per_s(self) -> float | None:
        """None: virtio is not the bottleneck."""
        return None

    async def probe(self, kind: str, timeout_s: float) -> ProbeResult:
        """Are QEMU and the given image there (the bench boots it when it needs it). An image built from the
        kind's recipe is the driver's to find (QemuArm64Driver.probe)."""
        binary = shutil.which(self.binary)
        if binary is None:
            return ProbeResult(False, f"{self.binary} not found (install qemu-system-arm)")
        if self.image is None:
            return ProbeResult(True, f"{binary} found; image from the kind's recipe ({self.timing})")
        if not Path(self.image).exists():
            return ProbeResult(False, f"image {self.image} missing (hilbench image build {kind})")
        return ProbeResult(True, f"{binary}, image {self.image} ({self.timing})")


from bench.links.browser import BrowserLink  # noqa: E402  (the browser link is a link type too)

Link = SerialLink | SshLink | QemuLink | BrowserLink
LinkType = type[SerialLink] | type[SshLink] | type[QemuLink] | type[BrowserLink]
LINK_TYPES: tuple[LinkType, ...] = (SerialLink, SshLink, QemuLink, BrowserLink)

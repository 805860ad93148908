"""The fleet file: one TOML inventory of every device, validated at load."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from bench.kinds import KINDS
from bench.provision.config import OsSpec, parse_os

DEFAULT_FLEET = Path(__file__).resolve().parent.parent / "fixtures" / "fleets" / "virtual.toml"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_SSH_RE = re.compile(r"^(?P<user>[^@\s]+)@(?P<host>\[[^\]]+\]|[^:\s]+)(?::(?P<port>\d+))?$")
_SERIAL_SCHEMES = ("rfc2217://", "socket://", "loop://", "/dev/")

_TOP_KEYS = {"device", "bench", "lab"}
_BENCH_KEYS = {"name", "results", "reports"}
_LAB_KEYS = {"coordinator", "acquire_timeout_s"}
_COMMON_KEYS = {"name", "kind", "virtual", "tags", "description"}
_PLACE_KEYS = {"place", "lab_host", "lab_tags"}
_LOCAL_LINK_FIELDS = {"port"}  # a board in the lab is found by usb_serial on its bench host; jobs use the place
_COORDINATOR_RE = re.compile(r"^(?:\[[^\]]+\]|[^:\s/]+):\d{1,5}$")
_TAG_KEY_RE = re.compile(r"^[a-z][a-z0-9_]+$")  # what labgrid accepts for place tags
_TAG_VALUE_RE = re.compile(r"^[a-z0-9_]*$")
_LINK_KEYS = {
    "serial": {"port", "baud", "mac", "usb_serial"},
    "ssh": {"ssh", "key", "host_key", "known_hosts", "python", "os"},
    "qemu": {"qemu"},
}
_QEMU_KEYS = {"image", "timing", "smp", "memory_mb", "binary", "cpu", "machine"}
_QEMU_TIMINGS = ("realtime", "icount")


@dataclass(frozen=True)
class SerialLink:
    """A serial port: a local device path or a pyserial URL (rfc2217://, socket://)."""

    url: str
    baud: int


@dataclass(frozen=True)
class SshLink:
    """An SSH endpoint with key authentication."""

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


@dataclass(frozen=True)
class QemuLink:
    """An emulated machine that the bench boots itself."""

    image: Path | None
    timing: str = "realtime"
    smp: int = 4
    memory_mb: int = 4096
    binary: str = "qemu-system-aarch64"
    machine: str = "virt"
    cpu: str = "cortex-a57"


Link = SerialLink | SshLink | QemuLink


@dataclass(frozen=True)
class LabPlace:
    """Where a device lives in a labgrid lab: a named place (exported by bench host `host`), or any
    place whose tags include `tags` (reserved when the job starts)."""

    place: str | None
    host: str | None
    tags: dict[str, str] = field(default_factory=dict)
    local: Link | None = None  # how the bench host reaches the board (what its exporter publishes), if given
    coordinator: str = ""  # the fleet's [lab] coordinator, "host:port"
    acquire_timeout_s: float = 60.0  # how long a job waits for a busy place or an absent exporter


@dataclass(frozen=True)
class Device:
    """One device of the fleet: its kind, how to reach it and its settings (kind defaults merged)."""

    name: str
    kind: str
    link: Link | None
    virtual: bool = False
    tags: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    lab: LabPlace | None = None  # set when the device is reached through a labgrid place (link None until acquired)
    os: OsSpec | None = None  # Linux boards: the OS image the bench writes ([device.os], bench.provision)

    def with_link(self, link: Link) -> Device:
        """A copy reached through another link (a started virtual device, a labgrid place)."""
        return replace(self, link=link)


@dataclass(frozen=True)
class Fleet:
    """All devices of one fleet file, in file order."""

    path: Path
    devices: tuple[Device, ...]
    bench: dict[str, Any] = field(default_factory=dict)
    lab: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.devices)

    def __len__(self) -> int:
        return len(self.devices)

    def get(self, name: str) -> Device:
        """The device called `name`, or a ConfigError listing the known names."""
        for dev in self.devices:
            if dev.name == name:
                return dev
        known = ", ".join(d.name for d in self.devices) or "(none)"
        raise ConfigError(f"{self.path}: no device named {name!r}", hint=f"devices in this fleet: {known}")

    def select(
        self,
        names: list[str] | tuple[str, ...] = (),
        kinds: list[str] | tuple[str, ...] = (),
        tags: list[str] | tuple[str, ...] = (),
    ) -> list[Device]:
        """Devices matching every given filter (names must exist; kinds must be known)."""
        for kind in kinds:
            if kind not in KINDS:
                raise ConfigError(f"unknown kind {kind!r}", hint=f"kinds: {', '.join(KINDS)}")
        chosen = [self.get(n) for n in names] if names else list(self.devices)
        if kinds:
            chosen = [d for d in chosen if d.kind in kinds]
        if tags:
            chosen = [d for d in chosen if set(tags) <= set(d.tags)]
        return chosen


def load_fleet(path: str | Path | None = None) -> Fleet:
    """Read and validate a fleet file (the bundled virtual fleet when `path` is None)."""
    fleet_path = Path(path) if path is not None else DEFAULT_FLEET
    try:
        text = fleet_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"fleet file {fleet_path} does not exist", hint="pass --fleet PATH") from None
    except OSError as exc:
        raise ConfigError(f"fleet file {fleet_path}: cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{fleet_path}: not valid TOML: {exc}") from None
    return parse_fleet(data, fleet_path)


def parse_fleet(data: dict[str, Any], path: Path) -> Fleet:
    """Validate parsed TOML `data` read from `path` into a Fleet."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}",
            hint="a fleet file has [[device]] tables and optional [bench] and [lab] tables",
        )
    bench = _table(data.get("bench", {}), path, "[bench]")
    for key in set(bench) - _BENCH_KEYS:
        raise ConfigError(f"{path}: [bench]: unknown key {key!r}", hint=f"known: {', '.join(sorted(_BENCH_KEYS))}")
    raw_devices = data.get("device", [])
    if not isinstance(raw_devices, list):
        raise ConfigError(f"{path}: 'device' must be an array of tables: write [[device]]")
    lab = _parse_lab(data.get("lab", {}), path)
    devices: list[Device] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_devices):
        dev = _parse_device(raw, path, index, path.parent)
        if dev.lab is not None and "coordinator" not in lab:
            raise ConfigError(
                f"{path}: device {dev.name!r}: field 'place'/'lab_tags' needs a labgrid coordinator",
                hint='add a [lab] table with coordinator = "HOST:20408"',
            )
        if dev.name in seen:
            raise ConfigError(
                f"{path}: device {dev.name!r}: field 'name': duplicate (also device #{seen[dev.name] + 1})",
                hint="device names must be unique within a fleet",
            )
        seen[dev.name] = index
        if dev.lab is not None:
            dev = replace(
                dev, lab=replace(dev.lab, coordinator=lab["coordinator"], acquire_timeout_s=lab["acquire_timeout_s"])
            )
        devices.append(dev)
    places = [d.lab.place for d in devices if d.lab and d.lab.place]
    for place in places:
        if places.count(place) > 1:
            raise ConfigError(f"{path}: place {place!r} is given to more than one device", hint="one place per board")
    return Fleet(path=path, devices=tuple(devices), bench=bench, lab=lab)


def _parse_lab(value: Any, path: Path) -> dict[str, Any]:
    lab = _table(value, path, "[lab]")
    for key in set(lab) - _LAB_KEYS:
        raise ConfigError(f"{path}: [lab]: unknown key {key!r}", hint=f"known: {', '.join(sorted(_LAB_KEYS))}")
    if "coordinator" in lab:
        addr = _typed(lab, "coordinator", str, f"{path}: [lab]", None)
        if not _COORDINATOR_RE.match(addr):
            raise ConfigError(
                f"{path}: [lab]: field 'coordinator': {addr!r} is not HOST:PORT", hint='e.g. "lab-server:20408"'
            )
    timeout = _typed(lab, "acquire_timeout_s", float, f"{path}: [lab]", 60.0)
    if timeout <= 0:
        raise ConfigError(f"{path}: [lab]: field 'acquire_timeout_s': must be positive")
    return {**lab, "acquire_timeout_s": timeout}


def _parse_place(raw: dict[str, Any], where: str) -> LabPlace | None:
    if not _PLACE_KEYS & set(raw):
        return None
    for key in _LOCAL_LINK_FIELDS & set(raw):
        raise ConfigError(
            f"{where}: field {key!r}: a device in the lab is reached through its place",
            hint=f"remove {key!r}, or remove 'place'/'lab_tags' to use the local link",
        )
    place = _typed(raw, "place", str, where, None)
    if place is not None and not _NAME_RE.match(place):
        raise ConfigError(f"{where}: field 'place': invalid name {place!r}", hint="letters, digits, '.', '_' or '-'")
    host = _typed(raw, "lab_host", str, where, None)
    if host is not None and not _NAME_RE.match(host):
        raise ConfigError(f"{where}: field 'lab_host': invalid name {host!r}", hint="the exporter name of a bench host")
    if place is not None and host is None:
        raise ConfigError(f"{where}: field 'lab_host': missing", hint="name the bench host whose exporter serves it")
    tags = _typed(raw, "lab_tags", dict, where, {})
    for key, value in tags.items():
        if not _TAG_KEY_RE.match(key) or not isinstance(value, str) or not _TAG_VALUE_RE.match(value):
            raise ConfigError(
                f"{where}: field 'lab_tags': {key} = {value!r} is not a labgrid tag",
                hint="keys: lowercase letters, digits, '_' (starting with a letter); values: a string of the same",
            )
    if place is None and not tags:
        raise ConfigError(f"{where}: field 'place': missing", hint="give place (and lab_host), or lab_tags to reserve")
    return LabPlace(place=place, host=host, tags=dict(tags))


def _table(value: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {where} must be a table")
    return value


def _parse_device(raw: Any, path: Path, index: int, base_dir: Path) -> Device:
    where = f"{path}: device #{index + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table ([[device]])")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{where}: field 'name': {'missing' if name is None else f'invalid value {name!r}'}",
            hint="give each device a name of letters, digits, '.', '_' or '-'",
        )
    where = f"{path}: device {name!r}"
    kind = raw.get("kind")
    if kind not in KINDS:
        raise ConfigError(
            f"{where}: field 'kind': {'missing' if kind is None else f'unknown kind {kind!r}'}",
            hint=f"kinds: {', '.join(KINDS)}",
        )
    info = KINDS[kind]
    allowed = _COMMON_KEYS | _PLACE_KEYS | _LINK_KEYS[info.link] | set(info.defaults)
    for key in raw:
        if key not in allowed:
            other = next((lk for lk, keys in _LINK_KEYS.items() if key in keys), None)
            hint = (
                f"{kind} devices are reached by {info.link}, not {other}"
                if other
                else f"fields for {kind}: {', '.join(sorted(allowed))}"
            )
            raise ConfigError(f"{where}: unknown field {key!r}", hint=hint)
    virtual = _typed(raw, "virtual", bool, where, False)
    tags = _typed(raw, "tags", list, where, [])
    if not all(isinstance(t, str) for t in tags):
        raise ConfigError(f"{where}: field 'tags': must be a list of strings")
    settings = dict(info.defaults)
    for key, default in info.defaults.items():
        if key in raw:
            settings[key] = _typed(raw, key, type(default), where, default)
    lab = _parse_place(raw, where)
    if lab is not None and info.link == "qemu":
        raise ConfigError(f"{where}: field 'place': {kind} devices run on the bench host itself, not in a lab place")
    link = _parse_link(raw, info.link, where, kind, virtual or lab is not None, settings, base_dir)
    if lab is not None:  # jobs reach it through the place; `ssh` says where its bench host's exporter finds it
        lab = replace(lab, local=link)
        link = None
    extra = {k: raw[k] for k in ("mac", "usb_serial", "python", "description") if k in raw}
    if lab is not None:  # what the place's link lacks: how to log in, and which board a udev match picks
        extra.update({k: _typed(raw, k, str, where, None) for k in ("host_key",) if k in raw})
        extra.update(
            {k: _resolve(_typed(raw, k, str, where, None), base_dir) for k in ("key", "known_hosts") if k in raw}
        )
        if "baud" in raw:
            extra["baud"] = _typed(raw, "baud", int, where, None)
    os_spec = parse_os(raw["os"], where, base_dir) if "os" in raw else None
    return Device(
        name=name, kind=kind, link=link, virtual=virtual, tags=tuple(tags), settings=settings, extra=extra, lab=lab,
        os=os_spec,
    )  # fmt: skip


def _typed(raw: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise ConfigError(f"{where}: field {key!r}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return value


def _parse_link(
    raw: dict[str, Any],
    link_kind: str,
    where: str,
    kind: str,
    virtual: bool,
    settings: dict[str, Any],
    base_dir: Path,
) -> Link | None:
    if link_kind == "serial":
        baud = _typed(raw, "baud", int, where, settings.get("baud", 115200))
        port = _typed(raw, "port", str, where, None)
        if port is None:
            if virtual:
                return None
            raise ConfigError(
                f"{where}: missing link: field 'port'",
                hint='give port = "/dev/ttyACM0", "rfc2217://host:port" or "socket://host:port", or set virtual = true',
            )
        if not port.startswith(_SERIAL_SCHEMES):
            raise ConfigError(
                f"{where}: field 'port': {port!r} is not a serial port",
                hint="use a /dev/... path or an rfc2217:// or socket:// URL",
            )
        return SerialLink(url=port, baud=baud)
    if link_kind == "ssh":
        target = _typed(raw, "ssh", str, where, None)
        if target is None:
            if virtual:
                return None
            raise ConfigError(f"{where}: missing link: field 'ssh'", hint='give ssh = "user@host:22" and key = "PATH"')
        match = _SSH_RE.match(target)
        if not match:
            raise ConfigError(f"{where}: field 'ssh': {target!r} is not user@host[:port]")
        key = _typed(raw, "key", str, where, None)
        known = _typed(raw, "known_hosts", str, where, None)
        return SshLink(
            user=match["user"],
            host=match["host"].strip("[]"),
            port=int(match["port"] or 22),
            key=_resolve(key, base_dir),
            host_key=_typed(raw, "host_key", str, where, None),
            known_hosts=_resolve(known, base_dir),
        )
    qemu = raw.get("qemu")
    if qemu is None:
        return QemuLink(image=None)
    if not isinstance(qemu, dict):
        raise ConfigError(f"{where}: field 'qemu': must be a table ([device.qemu])")
    for key in qemu:
        if key not in _QEMU_KEYS:
            raise ConfigError(f"{where}: qemu: unknown field {key!r}", hint=f"known: {', '.join(sorted(_QEMU_KEYS))}")
    qwhere = f"{where}: qemu"
    timing = _typed(qemu, "timing", str, qwhere, "realtime")
    if timing not in _QEMU_TIMINGS:
        raise ConfigError(f"{qwhere}: field 'timing': {timing!r}", hint="use 'realtime' or 'icount'")
    image = _typed(qemu, "image", str, qwhere, None)
    return QemuLink(
        image=_resolve(image, base_dir),
        timing=timing,
        smp=_typed(qemu, "smp", int, qwhere, 4),
        memory_mb=_typed(qemu, "memory_mb", int, qwhere, 4096),
        binary=_typed(qemu, "binary", str, qwhere, "qemu-system-aarch64"),
        machine=_typed(qemu, "machine", str, qwhere, "virt"),
        cpu=_typed(qemu, "cpu", str, qwhere, "cortex-a57"),
    )


def _resolve(value: str | None, base_dir: Path) -> Path | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()

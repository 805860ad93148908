"""The fleet file: one TOML inventory of every device, validated at load."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bench.config.kinds import KINDS, USB_SERIAL_JTAG, Esp32c6Settings, Kind, Settings, get_kind, serial_baud
from bench.config.os_spec import OsSpec, parse_os
from bench.core.errors import ConfigError
from bench.core.fields import Declared, SettingError, matching, ranged, resolve_path, settings_from
from bench.core.inputs import check_file, load_toml
from bench.core.paths import FLEETS_DIR
from bench.energy.spec import EnergySpec, Ppk2Settings, parse_energy
from bench.links.spec import DEFAULT_BAUD, LINK_TYPES, FleetEntry, Link, QemuLink, SerialLink, SshLink
from bench.power import PowerSpec, parse_power
from bench.power.labgrid import LabgridSettings

__all__ = ["DEFAULT_FLEET", "Device", "Fleet", "LabPlace", "Link", "QemuLink", "SerialLink", "SshLink", "load_fleet"]

DEFAULT_FLEET = FLEETS_DIR / "virtual.toml"
FLEET_ENV = "HILBENCH_FLEET"  # a fleet file used when no --fleet is given (as labgrid's LG_ENV)
LOCAL_FLEET = "fleet.toml"  # a fleet file in the current folder, used when neither --fleet nor $HILBENCH_FLEET is
BUNDLED = "bundled"

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
_NAME_RE = re.compile(_NAME)

_TOP_KEYS = {"device", "bench", "lab", "results"}
_COMMON_KEYS = {"name", "kind", "virtual", "tags", "description", "trusted_key", "power", "energy", "energy_budget_mj"}
_PLACE_KEYS = {"place", "lab_host", "lab_tags"}
_LOCAL_LINK_FIELDS = {"port"}  # a board in the lab is found by usb_serial on its bench host; jobs use the place
_TAG_KEY_RE = re.compile(r"[a-z][a-z0-9_]+")  # what labgrid accepts for place tags
_TAG_VALUE_RE = re.compile(r"[a-z0-9_]*")


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
    # what the place's published link lacks: how to log in to a Linux board, the baud rate of a serial one
    key: Path | None = None
    host_key: str | None = None
    known_hosts: Path | None = None
    baud: int | None = None
    kind_baud: int = DEFAULT_BAUD  # the kind's baud rate, when neither the fleet nor the place gives one


@dataclass(frozen=True)
class DeviceFields(Declared):
    """The fields of a [[device]] table besides its name, kind, link, the kind's settings and its instruments'
    tables: whether the bench starts it, its tags, what identifies a real board, a Linux board's interpreter,
    the key its models are verified with, its energy budget, and where it lives in a labgrid lab."""

    virtual: bool = False
    tags: tuple[str, ...] = ()
    description: str = ""
    mac: str | None = None  # an ESP32-C6's MAC: a virtual board's, or what `fleet discover` matches a real one by
    usb_serial: str | None = None  # a real board's USB serial number (a lab exporter's udev match)
    # a Linux board's interpreter for the host agent: it reaches a remote shell (quoted too)
    python: str = matching("python3", r"[A-Za-z0-9_./+~-]+", "is not a path to a Python interpreter (e.g. "
                           "python3 or /usr/bin/python3: no spaces or shell characters)")  # fmt: skip
    trusted_key: Path | None = None  # the public key its models are verified with (else [bench]'s)
    energy_budget_mj: float | None = ranged(None, 1e-6, 1e12)  # judged on its energy meter's figures
    place: str | None = matching(None, _NAME, "is not a name (letters, digits, '.', '_' or '-')")
    lab_host: str | None = matching(None, _NAME, "is not the exporter name of a bench host")
    lab_tags: dict[str, str] = field(default_factory=dict)

    def check(self) -> None:
        for key, value in self.lab_tags.items():
            if not _TAG_KEY_RE.fullmatch(key) or not _TAG_VALUE_RE.fullmatch(value):
                raise SettingError("lab_tags", f"{key} = {value!r} is not a labgrid tag (keys: lowercase letters, "
                                   "digits, '_', starting with a letter; values: the same)")  # fmt: skip
        if self.place is not None and self.lab_host is None:
            raise SettingError("lab_host", "missing: name the bench host whose exporter serves the place")
        if self.lab_host is not None and self.place is None and not self.lab_tags:
            raise SettingError("place", "missing: give place (and lab_host), or lab_tags to reserve")


@dataclass(frozen=True)
class Device:
    """One device of the fleet: its kind, how to reach it and its typed settings (the kind's defaults when
    none are given)."""

    name: str
    kind: str
    link: Link | None
    virtual: bool = False
    tags: tuple[str, ...] = ()
    settings: Settings = None  # type: ignore[assignment]  # None: the kind's defaults; a mapping: those changed
    description: str = ""
    mac: str | None = None  # an ESP32-C6's MAC: a virtual board's, or what `fleet discover` matches a real one by
    usb_serial: str | None = None  # a real board's USB serial number (a lab exporter's udev match)
    python: str = "python3"  # a Linux board's interpreter for the host agent
    trusted_key: Path | None = None  # the public key its models are verified with ([bench] or its own)
    signing_key: Path | None = None  # the private key that signs its models ([bench])
    reset_model: bool = False  # deploy the bundled model again, whatever the device holds (bench.bundles)
    listen: str | None = None  # the address a served virtual board listens on (`hilbench lab serve --address`)
    lab: LabPlace | None = None  # set when the device is reached through a labgrid place (link None until acquired)
    os: OsSpec | None = None  # Linux boards: the OS image the bench writes ([device.os], bench.provision)
    power: PowerSpec | None = None  # how the bench switches its supply (bench/power), when the lab can
    energy: EnergySpec | None = None  # the power meter on its supply (bench/energy), when it has one

    def __post_init__(self) -> None:
        if not isinstance(self.settings, Settings):
            object.__setattr__(self, "settings", self.kind_info.settings(**(self.settings or {})))

    @property
    def kind_info(self) -> Kind:
        """The registry entry of the device's kind (ConfigError for an unknown kind)."""
        return get_kind(self.kind)

    def with_link(self, link: Link) -> Device:
        """A copy reached through another link (a started virtual device, a labgrid place)."""
        return replace(self, link=link)

    def with_settings(self, **changes: Any) -> Device:
        """A copy with some settings changed."""
        return replace(self, settings=replace(self.settings, **changes))


@dataclass(frozen=True)
class BenchSettings(Declared):
    """The fleet file's `[bench]` table: this bench's name (its runs carry it), the results store its commands
    use (a file, sqlite:///PATH or postgresql://...; `--results` wins), where reports go, and the key files every
    device's models are verified and signed with (checked to exist, bench.bundles.trust)."""

    name: str = ""
    results: str = ""
    reports: str = ""
    trusted_key: Path | None = None
    signing_key: Path | None = None


@dataclass(frozen=True)
class LabSettings(Declared):
    """The fleet file's `[lab]` table: the labgrid coordinator its places are reserved through ("" when the
    fleet has no lab places) and how long a job waits for a busy place or an absent exporter."""

    coordinator: str = matching("", r"|(?:\[[^\]]+\]|[^:\s/]+):\d{1,5}", 'is not HOST:PORT (e.g. "lab-server:20408")')
    acquire_timeout_s: float = ranged(60.0, 0.001, 86_400.0)


@dataclass(frozen=True)
class RawRetention(Declared):
    """How long the results store keeps a run's raw frame and input rows (the fleet file's `[results]` table):
    while the run is younger than `keep_raw_days`, or among the last `keep_raw_runs` runs of its device and
    session (0: no such limit). Everything else of a run is kept forever (docs/results.md, Retention)."""

    keep_raw_days: int = ranged(30, 0, 36_500)
    keep_raw_runs: int = ranged(30, 0, 1_000_000)


@dataclass(frozen=True)
class Fleet:
    """All devices of one fleet file, in file order."""

    path: Path
    devices: tuple[Device, ...]
    bench: BenchSettings = field(default_factory=BenchSettings)
    lab: LabSettings = field(default_factory=LabSettings)
    retention: RawRetention = field(default_factory=RawRetention)

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
        raise ConfigError(
            f"{self.path}: no device named {name!r}",
            hint=f"devices in this fleet: {known}",
            file=str(self.path),
            device=name,
        )

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
    data = load_toml(fleet_path, "fleet file", hint="a fleet file is TOML with [[device]] tables")
    return parse_fleet(data, fleet_path)


def find_fleet(given: str | Path | None) -> tuple[Path, str]:
    """The fleet file to use and where it came from: `given` (--fleet), else $HILBENCH_FLEET, else ./fleet.toml,
    else the bundled virtual fleet (origin BUNDLED)."""
    if given is not None:
        return Path(given), "--fleet"
    env = os.environ.get(FLEET_ENV)
    if env:
        return Path(env), FLEET_ENV
    if Path(LOCAL_FLEET).is_file():
        return Path(LOCAL_FLEET), f"./{LOCAL_FLEET}"
    return DEFAULT_FLEET, BUNDLED


def one_board_fleet(port: str, kind: str = "esp32c6") -> Fleet:
    """A fleet of one real board on serial `port` (`--port /dev/ttyACM0`), named `board`. On a kind with a USB
    personality (the ESP32-C6's `usb` setting), a /dev/ttyACM* port is the chip's own USB-Serial-JTAG peripheral
    (a CDC-ACM device); other ports are a UART bridge."""
    entry: dict[str, Any] = {"name": "board", "kind": kind, "port": port}
    if "usb" in get_kind(kind).setting_types() and "ttyACM" in port:
        entry["usb"] = USB_SERIAL_JTAG
    return parse_fleet({"device": [entry]}, Path(f"--port {port}"))  # what titles say the fleet is


def parse_fleet(data: dict[str, Any], path: Path) -> Fleet:
    """Validate parsed TOML `data` read from `path` into a Fleet."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}",
            hint="a fleet file has [[device]] tables and optional [bench], [lab] and [results] tables",
        )
    raw_bench = _table(data.get("bench", {}), path, "[bench]")
    bench = settings_from(BenchSettings, raw_bench, str(path), table="bench", what="[bench]")
    raw_devices = data.get("device", [])
    if not isinstance(raw_devices, list):
        raise ConfigError(f"{path}: 'device' must be an array of tables: write [[device]]")
    lab = _parse_lab(data.get("lab", {}), path)
    retention = parse_retention(_table(data.get("results", {}), path, "[results]"), f"{path}: [results]")
    keys = {"trusted_key": _key_file(bench.trusted_key, "trusted_key", f"{path}: [bench]", path.parent),
            "signing_key": _key_file(bench.signing_key, "signing_key", f"{path}: [bench]", path.parent)}  # fmt: skip
    devices: list[Device] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_devices):
        dev = _parse_device(raw, path, index, path.parent)
        own = _key_file(dev.trusted_key, "trusted_key", f"{path}: device {dev.name!r}", path.parent)
        trust = {"trusted_key": own or keys["trusted_key"], "signing_key": keys["signing_key"]}
        dev = replace(dev, **{k: v for k, v in trust.items() if v is not None})
        if dev.lab is not None and not lab.coordinator:
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
                dev, lab=replace(dev.lab, coordinator=lab.coordinator, acquire_timeout_s=lab.acquire_timeout_s)
            )
        if dev.power is not None and dev.power.driver == "labgrid":
            dev = replace(dev, power=_labgrid_power(dev, lab, path))
        devices.append(dev)
    places = [d.lab.place for d in devices if d.lab and d.lab.place]
    for place in places:
        if places.count(place) > 1:
            raise ConfigError(f"{path}: place {place!r} is given to more than one device", hint="one place per board")
    return Fleet(path=path, devices=tuple(devices), bench=bench, lab=lab, retention=retention)


def parse_retention(raw: dict[str, Any], where: str) -> RawRetention:
    """A `[results]` table validated into a RawRetention (ConfigError naming `where` and the field)."""
    return settings_from(RawRetention, raw, where, table="results", what="[results]")


def _labgrid_power(dev: Device, lab: LabSettings, path: Path) -> PowerSpec:
    """A `power = { driver = "labgrid" }` spec with the device's place and the fleet's coordinator filled in."""
    assert dev.power is not None
    settings = dev.power.settings
    assert isinstance(settings, LabgridSettings)  # driver "labgrid"
    place = settings.place or (dev.lab.place if dev.lab is not None else None)
    coordinator = settings.coordinator or lab.coordinator
    if not place or not coordinator:
        raise ConfigError(
            f"{path}: device {dev.name!r}: field 'power': driver 'labgrid' needs a named place and a coordinator",
            hint='give the device `place` and `lab_host`, and the fleet a [lab] table with coordinator = "HOST:20408"',
        )
    return replace(dev.power, settings=settings.replace(place=place, coordinator=coordinator))


def _parse_lab(value: Any, path: Path) -> LabSettings:
    """The `[lab]` table validated into LabSettings (ConfigError naming the file and the field)."""
    return settings_from(LabSettings, _table(value, path, "[lab]"), str(path), table="lab", what="[lab]")


def _parse_place(given: DeviceFields, link: FleetEntry) -> LabPlace | None:
    """Where the device lives in the lab (None: not in a lab), with what its place's published link lacks: how
    to log in, the baud rate (`link`'s fields)."""
    if given.place is None and not given.lab_tags:
        return None
    for key in _LOCAL_LINK_FIELDS & set(link.raw):
        raise ConfigError(
            f"{link.where}: field {key!r}: a device in the lab is reached through its place",
            hint=f"remove {key!r}, or remove 'place'/'lab_tags' to use the local link",
        )
    login = link.link
    return LabPlace(place=given.place, host=given.lab_host, tags=dict(given.lab_tags), key=login.key,
                    host_key=login.host_key, known_hosts=login.known_hosts, baud=login.baud,
                    kind_baud=link.default_baud)  # fmt: skip


def _key_file(file: Path | None, key: str, where: str, base_dir: Path) -> Path | None:
    """A key file named by field `key` (bench.bundles.trust), taken from the fleet file's folder: it must exist."""
    file = resolve_path(str(file), base_dir) if file is not None else None
    if file is not None:
        try:
            check_file(file, "key")
        except ConfigError as exc:
            raise ConfigError(
                f"{where}: field {key!r}: {exc.message}",
                hint="make one with `hilbench keys gen`",
                file=str(file),
                field=key,
            ) from None
    return file


def _table(value: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {where} must be a table")
    return value


def _file_settings(settings: type[Settings], values: dict[str, Any], base_dir: Path, where: str) -> dict[str, str]:
    """The settings the kind declares as naming a file (`file_path`, or `named(or_path=SUFFIX)` given a path: a
    team's model, a firmware image), taken from the fleet file's folder as every path in it is, not from
    wherever the bench was started."""
    out = {}
    for f in fields(settings):
        value, suffix = values.get(f.name), f.metadata.get("or_path")
        if not isinstance(value, str) or not value:
            continue
        if suffix and ("/" in value or value.endswith(suffix)):
            if not value.endswith(suffix):
                hint = f"name a bundled one or give the path of your {suffix} file"
                raise ConfigError(f"{where}: field {f.name!r}: {value!r} is a path but not a {suffix} file", hint=hint)
            out[f.name] = str(resolve_path(value, base_dir))
        elif f.metadata.get("path") and value not in f.metadata.get("keywords", ()):
            out[f.name] = str(resolve_path(value, base_dir))
    for key, file in out.items():  # a FIFO or a folder named here would hang or fail a flash much later
        if Path(file).exists():
            try:
                check_file(file, key)
            except ConfigError as exc:
                raise ConfigError(f"{where}: field {key!r}: {exc.message}", file=file, field=key) from None
    return out


def _parse_energy(raw: dict[str, Any], budget: float | None, where: str, base_dir: Path) -> EnergySpec | None:
    """The device's `energy` table with its `energy_budget_mj` (which needs a meter to be judged)."""
    if "energy" not in raw:
        if budget is not None:
            hint = 'add an energy table, e.g. energy = { driver = "ppk2", port = "/dev/ttyACM3" }'
            raise ConfigError(f"{where}: field 'energy_budget_mj': the device has no energy meter", hint=hint)
        return None
    return replace(parse_energy(raw["energy"], where, base_dir), budget_mj=budget)


def _check_marker(energy: EnergySpec | None, settings: Any, where: str) -> None:
    """A meter's logic input must be wired to a GPIO the device drives as its inference marker."""
    channel = (
        energy.settings.logic_channel if energy is not None and isinstance(energy.settings, Ppk2Settings) else None
    )
    if channel is not None and not (isinstance(settings, Esp32c6Settings) and settings.marker_gpio is not None):
        raise ConfigError(f"{where}: field 'energy.logic_channel': D{channel} is wired to no marker",
                          hint="set the device's marker_gpio: the GPIO its agent drives high around each inference "
                          "(esp32c6 boards)")  # fmt: skip


def _parse_device(raw: Any, path: Path, index: int, base_dir: Path) -> Device:
    where = f"{path}: device #{index + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table ([[device]])")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
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
    types = info.setting_types()
    allowed = _COMMON_KEYS | _PLACE_KEYS | info.link.fields | set(types)
    for key in raw:
        if key not in allowed:
            other = next((lt.family for lt in LINK_TYPES if key in lt.fields), None)
            hint = (
                f"{kind} devices are reached by {info.family}, not {other}"
                if other
                else f"fields for {kind}: {', '.join(sorted(allowed))}"
            )
            raise ConfigError(f"{where}: unknown field {key!r}", hint=hint)
    given = settings_from(DeviceFields, raw, where)
    settings = settings_from(
        info.settings, raw, where, adjust=lambda values: _file_settings(info.settings, values, base_dir, where)
    )
    in_lab = given.place is not None or bool(given.lab_tags)
    entry = FleetEntry(raw, where, kind, given.virtual or in_lab, base_dir, serial_baud(settings))
    lab = _parse_place(given, entry)
    if lab is not None and info.link is QemuLink:
        raise ConfigError(f"{where}: field 'place': {kind} devices run on the bench host itself, not in a lab place")
    link = info.link.parse(entry)
    if lab is not None:  # jobs reach it through the place (`ssh` says where its bench host's exporter finds it)
        lab, link = replace(lab, local=link), None
    os_spec = parse_os(raw["os"], where, base_dir) if "os" in raw else None
    power = parse_power(raw["power"], where, base_dir) if "power" in raw else None
    energy = _parse_energy(raw, given.energy_budget_mj, where, base_dir)
    _check_marker(energy, settings, where)
    return Device(
        name=name, kind=kind, link=link, virtual=given.virtual, tags=given.tags, settings=settings, lab=lab,
        power=power, energy=energy, os=os_spec, python=given.python, description=given.description, mac=given.mac,
        usb_serial=given.usb_serial, trusted_key=given.trusted_key,
    )  # fmt: skip

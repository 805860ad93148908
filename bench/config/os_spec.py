"""A Linux board's OS image as the fleet file gives it (`[device.os]`), validated into typed data.

```toml
[device.os]
image = "images/pi5-lab.img.xz"       # raw, .img.xz, .wic.bz2 ...; or "build": the bench's own image of the kind
sha256 = "..."                        # of the image file; required for a file (checked before anything is written)
bmap = "images/pi5-lab.img.bmap"      # default: the image's name without its compression suffix + .bmap
method = "usb-storage"                # or "command" (the vendor's flasher)
storage = "/dev/disk/by-id/usb-LinuxAut_sdmux_HS-SD_MMC_000000001-0:0"   # usb-storage: the block device
usbsdmux = "/dev/sg1"                 # usb-storage through a USB-SD-Mux: `usbsdmux SG host|dut` around the write
attach = ["rpiboot", "-d", "/usr/share/rpiboot/mass-storage-gadget64"]  # or: expose the storage by a command
command = ["sudo", "./l4t_initrd_flash.sh", "jetson-orin-nx-devkit", "external"]  # method = "command"
workdir = "Linux_for_Tegra"           # where `command` runs
timeout_s = 1800
power_on = ["uhubctl", "-l", "1-1", "-p", "2", "-a", "on"]
power_off = ["uhubctl", "-l", "1-1", "-p", "2", "-a", "off"]
boot_timeout_s = 300

[device.os.expect]                    # the fingerprint a vendor image boots into (the bench's own images know it)
kernel_release = "5.15.148-tegra"
os_release = { ID = "ubuntu", VERSION_ID = "22.04" }
nv_tegra_release = "# R36 (release), REVISION: 4.0"
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError

METHODS = ("usb-storage", "command")
BUILD = "build"  # image = "build": the bench's own image for the device's kind (firmware/<kind>/recipe.toml)
COMPRESSED = (".xz", ".bz2", ".gz", ".zst", ".lz4")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_KEYS = {"image", "sha256", "bmap", "method", "storage", "usbsdmux", "attach", "detach", "command", "workdir",
         "timeout_s", "power_on", "power_off", "boot_timeout_s", "expect"}  # fmt: skip
_EXPECT_KEYS = {"kernel_release", "os_release", "nv_tegra_release"}


@dataclass(frozen=True)
class OsSpec:
    """How one board gets its OS: which image, how it reaches the storage, how the board is powered."""

    image: Path | None  # None: the bench builds the kind's image (image = "build")
    sha256: str | None  # pinned sha256 of the image file (None only for "build": the build's own)
    bmap: Path | None
    method: str = "usb-storage"
    storage: Path | None = None  # usb-storage: the block device the board's card/eMMC shows up as
    usbsdmux: Path | None = None  # the USB-SD-Mux's control device
    attach: tuple[str, ...] = ()  # a command that exposes the storage to the host (mass-storage boot)
    detach: tuple[str, ...] = ()
    command: tuple[str, ...] = ()  # method "command": the vendor flasher ({image} and {bmap} are filled in)
    workdir: Path | None = None
    timeout_s: float = 1800.0
    power_on: tuple[str, ...] = ()
    power_off: tuple[str, ...] = ()
    boot_timeout_s: float = 300.0
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def built(self) -> bool:
        """True when the bench builds the image itself."""
        return self.image is None


def default_bmap(image: Path) -> Path:
    """`pi5.img.xz` -> `pi5.img.bmap`; `x.wic.bz2` -> `x.wic.bmap`; `disk.img` -> `disk.img.bmap`."""
    name = image.name
    for suffix in COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return image.with_name(name + ".bmap")


def parse_os(raw: Any, where: str, base_dir: Path) -> OsSpec:
    """Validate a `[device.os]` table; paths relative to the fleet file's folder."""
    where = f"{where}: os"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a table ([device.os])")
    for key in raw:
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown field {key!r}", hint=f"known: {', '.join(sorted(_KEYS))}")
    image_text = _get(raw, "image", str, where, None)
    if image_text is None:
        raise ConfigError(f"{where}: missing field 'image'", hint=f'give a file, or "{BUILD}" for the bench\'s own')
    image = None if image_text == BUILD else _path(image_text, base_dir)
    sha = _get(raw, "sha256", str, where, None)
    if sha is not None and not _SHA_RE.match(sha.lower()):
        raise ConfigError(f"{where}: field 'sha256': not 64 hex digits", hint="sha256sum IMAGE")
    if image is not None and sha is None:
        raise ConfigError(f"{where}: field 'sha256' is required for image {image}", hint=f"sha256sum {image}")
    method = _get(raw, "method", str, where, "usb-storage")
    if method not in METHODS:
        raise ConfigError(f"{where}: field 'method': {method!r}", hint=f"use {' or '.join(METHODS)}")
    command = _argv(raw, "command", where)
    if method == "command" and not command:
        raise ConfigError(f"{where}: method 'command' needs field 'command' (the flasher's argv)")
    bmap = _get(raw, "bmap", str, where, None)
    expect = _get(raw, "expect", dict, where, {})
    for key in expect:
        if key not in _EXPECT_KEYS:
            known = ", ".join(sorted(_EXPECT_KEYS))
            raise ConfigError(f"{where}.expect: unknown field {key!r}", hint=f"known: {known}")
    if not isinstance(expect.get("os_release", {}), dict):
        raise ConfigError(f"{where}.expect: field 'os_release' must be a table, e.g. {{ ID = \"debian\" }}")
    workdir = _get(raw, "workdir", str, where, None)
    if bool(raw.get("power_on")) != bool(raw.get("power_off")):
        raise ConfigError(f"{where}: give both power_on and power_off (the commands that switch the board)")
    return OsSpec(
        image=image,
        sha256=sha.lower() if sha else None,
        bmap=_path(bmap, base_dir) if bmap else (default_bmap(image) if image else None),
        method=method,
        storage=_path(s, base_dir) if (s := _get(raw, "storage", str, where, None)) else None,
        usbsdmux=_path(m, base_dir) if (m := _get(raw, "usbsdmux", str, where, None)) else None,
        attach=_argv(raw, "attach", where),
        detach=_argv(raw, "detach", where),
        command=command,
        workdir=_path(workdir, base_dir) if workdir else None,
        timeout_s=_get(raw, "timeout_s", float, where, 1800.0),
        power_on=_argv(raw, "power_on", where),
        power_off=_argv(raw, "power_off", where),
        boot_timeout_s=_get(raw, "boot_timeout_s", float, where, 300.0),
        expect=dict(expect),
    )


def _get(raw: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{where}: field {key!r}: expected {kind.__name__}, got {value!r}")
    return value


def _argv(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field {key!r}: must be a list of strings (a command's argv)")
    return tuple(value)


def _path(value: str, base_dir: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()

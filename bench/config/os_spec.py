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

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.fields import REQUIRED, Declared, SettingError, chosen, matching, ranged, resolve_path, settings_from

METHODS = ("usb-storage", "command")
BUILD = "build"  # image = "build": the bench's own image for the device's kind (firmware/<kind>/recipe.toml)
COMPRESSED = (".xz", ".bz2", ".gz", ".zst", ".lz4")
_EXPECT_KEYS = {"kernel_release", "os_release", "nv_tegra_release"}


@dataclass(frozen=True)
class OsSpec(Declared):
    """How one board gets its OS: which image, how it reaches the storage, how the board is powered (the
    `[device.os]` table, each field declared and checked; paths taken from the fleet file's folder)."""

    image: Path | None = REQUIRED  # None: the bench builds the kind's image (image = "build")
    # pinned sha256 of the image file (None only for "build": the build's own)
    sha256: str | None = matching(None, r"[0-9a-fA-F]{64}", "is not 64 hex digits (sha256sum IMAGE)")
    bmap: Path | None = None  # default: the image's name without its compression suffix + .bmap
    method: str = chosen("usb-storage", METHODS)
    storage: Path | None = None  # usb-storage: the block device the board's card/eMMC shows up as
    usbsdmux: Path | None = None  # the USB-SD-Mux's control device
    attach: tuple[str, ...] = ()  # a command that exposes the storage to the host (mass-storage boot)
    detach: tuple[str, ...] = ()
    command: tuple[str, ...] = ()  # method "command": the vendor flasher ({image} and {bmap} are filled in)
    workdir: Path | None = None
    timeout_s: float = ranged(1800.0, 1.0, 86_400.0)
    power_on: tuple[str, ...] = ()
    power_off: tuple[str, ...] = ()
    boot_timeout_s: float = ranged(300.0, 1.0, 86_400.0)
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def built(self) -> bool:
        """True when the bench builds the image itself."""
        return self.image is None

    def check(self) -> None:
        if self.image is not None and self.sha256 is None:
            raise SettingError("sha256", f"is required for image {self.image} (sha256sum {self.image})")
        if self.method == "command" and not self.command:
            raise SettingError("command", "method 'command' needs field 'command' (the flasher's argv)")
        if bool(self.power_on) != bool(self.power_off):
            raise SettingError("power_off", "give both power_on and power_off (the commands that switch the board)")
        for key in self.expect:
            if key not in _EXPECT_KEYS:
                raise SettingError("expect", f"unknown field {key!r} (known: {', '.join(sorted(_EXPECT_KEYS))})")
        if not isinstance(self.expect.get("os_release", {}), dict):
            raise SettingError("expect", "field 'os_release' must be a table, e.g. { ID = \"debian\" }")


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
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: field 'os': must be a table ([device.os])")
    return settings_from(
        OsSpec, raw, where, table="os", what="[device.os]", adjust=lambda values: _placed(values, base_dir)
    )


def _placed(values: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """The table's paths taken from the fleet file's folder; image "build" as None; the sha256 in lower case;
    the bmap beside the image when not given."""
    out = {f.name: resolve_path(str(values[f.name]), base_dir) for f in dataclasses.fields(OsSpec)
           if isinstance(values.get(f.name), Path)}  # fmt: skip
    if values.get("image") == Path(BUILD):
        out["image"] = None
    if isinstance(values.get("sha256"), str):
        out["sha256"] = values["sha256"].lower()
    image = out.get("image")
    if "bmap" not in out and image is not None:
        out["bmap"] = default_bmap(image)
    return out

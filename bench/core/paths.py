"""Where the bench's own files are: the agents (host/, micropython/), the fixtures (models, keys, sessions,
baselines, the bundled fleet) and the firmware folder (virtual ESP32-C6 image, image recipes).

In a checkout they sit next to the `bench` package. An installed package (`pip install .`) carries them as
data files under `<prefix>/share/npc-hil-bench/` (pyproject.toml's [tool.setuptools.data-files]); they are
found through the installed distribution's file list, whatever the install scheme. Every other module asks
here, so there is one answer."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path, PurePosixPath

from bench.core.errors import ConfigError
from bench.core.folders import own_folder

PACKAGE_DIR = Path(__file__).resolve().parent.parent
DISTRIBUTION = "npc-hil-bench"
SHARE = "share/npc-hil-bench"
_MARKER = "fixtures/fleets/virtual.toml"  # a file every layout has


def _installed_root() -> Path | None:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.as_posix().endswith(f"{SHARE}/{_MARKER}"):
            located = Path(dist.locate_file(file)).resolve()
            return located.parents[len(Path(_MARKER).parts) - 1]
    return None


def data_root() -> Path:
    """The folder holding host/, micropython/, fixtures/ and firmware/: the checkout, else the installed data."""
    checkout = PACKAGE_DIR.parent
    if (checkout / _MARKER).is_file():
        return checkout
    installed = _installed_root()
    if installed is None:
        raise RuntimeError(
            f"npc-hil-bench: no data files next to {PACKAGE_DIR} and none installed "
            f"(reinstall with `pip install npc-hil-bench` or run from a checkout)"
        )
    return installed


ROOT = data_root()
HOST_DIR = ROOT / "host"  # the host agent (Linux boards, the ARM64 image)
MICROPYTHON_DIR = ROOT / "micropython"  # the MicroPython agent and the portable modules both agents share
WEB_DIR = ROOT / "web"  # the web agent (JS), its page and npm lockfile; `npm ci` there puts LiteRT.js in node_modules
FIRMWARE_DIR = ROOT / "firmware"  # the virtual ESP32-C6 firmware and the image recipes, one folder per kind
ESP32C6_DEFAULT_FIRMWARE = FIRMWARE_DIR / "esp32c6" / "host-clock-vm.bin"  # boots on virtual boards only
FIXTURES_DIR = ROOT / "fixtures"
HIL_DIR = ROOT / "hil"  # the device suite (`hilbench suite --fleet FILE`: pytest over it with the bench's plugin)
MODELS_DIR = FIXTURES_DIR / "models"
KEYS_DIR = FIXTURES_DIR / "keys"
SESSIONS_DIR = FIXTURES_DIR / "sessions"
BASELINES_DIR = FIXTURES_DIR / "baselines"
FLEETS_DIR = FIXTURES_DIR / "fleets"
OUTPUT_DIR = Path("reports")  # where a command's reports, logs and results store go (relative: the current folder)
DEFAULT_STORE = OUTPUT_DIR / "results.sqlite"  # the results store when neither a command nor the fleet names one
WIRE_MODULE = PACKAGE_DIR / "agent" / "wire.py"  # the bench's wire format, deployed unchanged to both agents


def cache_root() -> Path:
    """The bench's cache folder ($HILBENCH_CACHE_DIR or ~/.cache/npc-hil-bench): built images, downloads,
    virtual devices' state, the OTA store and the logs of work done outside a run. Made and checked by
    `bench.core.folders` each time: this user's own, nobody else may write to it."""
    env = os.environ.get("HILBENCH_CACHE_DIR")
    if env:
        return own_folder(Path(env), "cache folder ($HILBENCH_CACHE_DIR)")
    return own_folder(Path.home() / ".cache" / "npc-hil-bench", "cache folder")


def state_dir() -> Path:
    """Where devices keep their persistent state (virtual devices' flash files, filesystems and keys; a web
    device's origin storage): $HILBENCH_STATE_DIR, else the bench cache's `virtual/`."""
    env = os.environ.get("HILBENCH_STATE_DIR")
    if env:
        return own_folder(Path(env), "state folder ($HILBENCH_STATE_DIR)")
    return own_folder(cache_root() / "virtual", "state folder")


def default_log_dir() -> Path:
    """Where a driver writes its logs when no run gave it a log folder."""
    return own_folder(cache_root() / "logs", "log folder")


def deploy_name(device: str, name: str) -> str:
    """`name` if it is a path inside the agent folder (relative, no `..`); else a ConfigError naming the device."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\x00" in name:
        raise ConfigError(f"device {device!r}: deploy path {name!r} must stay inside the agent folder",
                          hint="use a relative name without '..'")  # fmt: skip
    return name

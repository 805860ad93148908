"""The kind registry: one entry per device kind, the only place the bench looks a kind's name up.

An entry says how a device of the kind is reached (its link type), which driver flashes it and runs its
agent, which virtual stand-in replaces it, which image builder makes its system image (if any), which
agent opener a replay uses for it, and its typed settings with their defaults. Drivers, stand-ins and
openers are named "module:attribute" and imported when first used, so this module sits below them all.
docs/extending.md shows how to add a kind.
"""

from __future__ import annotations

import importlib
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.core.errors import ConfigError
from bench.core.fields import (
    Declared,
    SettingError,
    chosen,
    file_path,
    matching,
    named,
    ranged,
    setting_types,
)
from bench.core.paths import ESP32C6_DEFAULT_FIRMWARE, ROOT
from bench.links.spec import DEFAULT_BAUD, BrowserLink, Link, LinkType, QemuLink, SerialLink, SshLink

# the agent a kind's devices run (which files are deployed and hashed: bench.bundles, bench.bundles.fingerprint)
HOST_AGENT, MICROPYTHON_AGENT, WEB_AGENT = "host", "micropython", "web"
RUNTIMES = (HOST_AGENT, MICROPYTHON_AGENT, WEB_AGENT)
UPDATE_CHANNELS = ("coap", "grpc", "websocket")  # how a device fetches models: bench/ota/channels.py

DECISION_BUDGET_MS = 50  # input sent -> decision, unless a kind or the fleet says otherwise
VOICE_CHOICES = ("auto", "voice", "voicef")
NO_SHELL_PATH = r"(?!(.*/)?\.\.(/|$))[A-Za-z0-9_./~-]+"  # a path a remote shell takes as it is, with no '..'
COUNTED = "counted"  # an ESP32-C6's `firmware`: the counted firmware the bench builds (bench.bundles.c6_firmware)


def runs_counted(firmware: str, virtual: bool) -> bool:
    """Whether an ESP32-C6 whose `firmware` setting is `firmware` runs the counted firmware: named so, or a virtual
    board given none (the chip's MicroPython on the chip's clock; a real board is refused until it is set)."""
    return firmware == COUNTED or (not firmware and virtual)


@dataclass(frozen=True)
class Settings(Declared):
    """What every kind can set in the fleet file (fields of a [[device]] table besides name, kind, link).
    Each number has a range and each name a safe form, checked when the settings are made (SettingError);
    a kind cannot lose a check by overriding a field (bench.core.fields.Declared)."""

    fps_target: int = ranged(60, 1, 1000)
    vsync_hz: int = ranged(60, 1, 1000)
    decision_budget_ms: int = ranged(DECISION_BUDGET_MS, 1, 60_000)
    model: str = named("npc-policy-int8", or_path=".tflite")  # fixtures/models/<model>.<format's extension>
    model_format: str = "tflite-int8"  # what the device runs: tflite-int8, tflite-f32, npcm-int8 (bench/models)
    model_version: int = ranged(1, 1, 1_000_000_000)  # the version the deployed model is announced with
    ota_timing: str = "lan"  # CoAP retransmission timing for updates: lan, rfc7252, loopback (bench/ota/timing.py)
    ota_server_host: str = named("127.0.0.1")  # where the device reaches the bench's update server (QEMU: the driver's)
    # what a replay sends it: auto (by link capacity), voice (16 kHz PCM) or voicef (features)
    voice: str = chosen("auto", VOICE_CHOICES)
    update_channel: str = chosen("coap", UPDATE_CHANNELS)  # coap, grpc (Linux-class boards), websocket (web)
    stall_s: float = ranged(5.0, 0.1, 3600)  # no frame record this long mid-run: the device stopped answering
    reply_timeout_s: float = ranged(5.0, 0.1, 3600)  # how long the bench waits for one agent reply
    # a replay on the device's own clock (docs/replay.md) plays as much of the session as fits this many seconds of
    # the bench's time, from the start; 0: the session's own length (at the replay's speed)
    replay_budget_s: float = ranged(0.0, 0.0, 3600)
    # a replay on the device's own clock plays exactly the session's first this many seconds every night, however
    # long the bench takes (up to SPAN_STRETCH x replay_budget_s): the same part of the session each night, so its
    # counted figures compare (docs/replay.md, "Coverage"); 0: as much as fits replay_budget_s
    replay_span_s: float = ranged(0.0, 0.0, 3600)
    # a replay sends each sampled channel (voice, gaze, mocap) at most this often, the first input of each 1/N s
    # of session time (events always go): for a board whose agent cannot take the session's every input; 0: all
    input_max_hz: float = ranged(0.0, 0.0, 1000)


@dataclass(frozen=True)
class Flashed(Settings):
    """The settings of a kind that flashes a firmware image (`Kind.firmware`): the device's own image ("": the
    kind's), a path from the checkout or the fleet file's folder."""

    firmware: str = file_path()


# How an ESP32-C6 board's USB port reaches the chip: a USB-UART bridge chip with the DTR/RTS auto-reset
# circuit, or the chip's own USB-Serial-JTAG peripheral (USB id 303a:1001; esptool resets it with `usb-reset`).
UART_BRIDGE, USB_SERIAL_JTAG = "uart-bridge", "usb-serial-jtag"
UsbPersonality = Literal["uart-bridge", "usb-serial-jtag"]
USB_PERSONALITIES: tuple[str, ...] = typing.get_args(UsbPersonality)
# ESP32-C6 GPIOs a marker must not drive (ESP32-C6 datasheet, "Pin Overview")
RESERVED_GPIOS = {12: "USB D- (the USB-Serial-JTAG port)", 13: "USB D+ (the USB-Serial-JTAG port)",
                  16: "U0TXD (the console UART)", 17: "U0RXD (the console UART)",
                  **{n: "an in-package flash pin (SPI)" for n in range(24, 31)}}  # fmt: skip


@dataclass(frozen=True)
class Esp32c6Settings(Flashed):
    """An ESP32-C6 running MicroPython."""

    fps_target: int = ranged(20, 1, 1000)
    vsync_hz: int = ranged(20, 1, 1000)
    # Two frame periods at 20 FPS: an input waits up to one 50 ms period for the next decision slot, and the
    # decision may take most of one (published mean inference 24.6 ms). The design's 50 ms end-to-end budget
    # cannot be met at this frame rate by construction (docs/pytest.md, "Findings"), so it is not this kind's.
    decision_budget_ms: int = ranged(100, 1, 60_000)
    model_format: str = "npcm-int8"  # fixtures/models/<model>.npcm, converted from the .tflite
    baud: int = ranged(921600, 300, 12_000_000)
    flash_size: int = ranged(8 * 1024 * 1024, 1024 * 1024, 128 * 1024 * 1024)
    memory_limit_kb: int = ranged(160, 0, 512)  # live MicroPython heap the agent may use (of ~300 KB free)
    reply_timeout_s: float = 15.0  # pure-MicroPython P-256 verification of a model: seconds on a 160 MHz core
    # the agent on the chip's 160 MHz core cannot take a session's 313 inputs a second (each mocap sample is ~1 ms of
    # soft-float JSON and 4 ms of features in MicroPython): gaze, mocap and voice go at most 30 times a second
    input_max_hz: float = ranged(30.0, 0.0, 1000)
    wire_speed: bool = False  # virtual board: pace flashing at the simulated baud rate
    usb: UsbPersonality = UART_BRIDGE  # the board's USB personality (docs/esp32c6.md)
    # image flashed at 0x0: "counted" (the default of a virtual board) = the bench's counted MicroPython firmware,
    # built from its pinned source (docs/esp32c6.md); a path = that image (firmware/esp32c6/host-clock-vm.bin: the
    # unix-port VM on the host's clock, for the bench's own unit tests)
    firmware: str = file_path(keywords=(COUNTED,))
    # the GPIO the agent drives high around each frame's inference (docs/lab-control.md, "The inference marker"); a PPK2
    # logic input wired to it is the meter's `logic_channel`. None: the agent drives no pin
    marker_gpio: int | None = ranged(None, 0, 30)

    def check(self) -> None:
        if self.marker_gpio is not None and self.marker_gpio in RESERVED_GPIOS:
            raise SettingError("marker_gpio", f"GPIO{self.marker_gpio} is {RESERVED_GPIOS[self.marker_gpio]}")


def serial_baud(settings: Settings) -> int:
    """The baud rate a device with `settings` is driven at over a serial link: its kind's setting, else the link's
    default."""
    return settings.baud if isinstance(settings, Esp32c6Settings) else DEFAULT_BAUD


@dataclass(frozen=True)
class MemoryLimited(Settings):
    """The settings of a kind whose agent runs under a memory limit: the host agent's `--mem-limit-mb`, the web
    agent's WASM heap. A kind that has one derives from this."""

    memory_limit_mb: int = ranged(256, 0, 1_048_576)


@dataclass(frozen=True)
class LinuxSettings(MemoryLimited):
    """A Linux board reached over SSH: agent folder (under $HOME unless absolute), telemetry source and period."""

    agent_dir: str = matching("npc-hil-bench", NO_SHELL_PATH, "has characters a remote shell would act on, or '..'")
    telemetry: str = "tegrastats"  # "tegrastats" (Jetson) or "sysfs" (thermal zones, cpufreq, vcgencmd)
    telemetry_interval_ms: int = ranged(500, 10, 60_000)
    memory_limit_mb: int = 512
    agent_start_timeout_s: float = ranged(20.0, 1, 3600)  # agent started -> listening (imports numpy, tflite)


@dataclass(frozen=True)
class Pi5Settings(LinuxSettings):
    """A Raspberry Pi 5."""

    fps_target: int = ranged(30, 1, 1000)
    memory_limit_mb: int = 256
    telemetry: str = "sysfs"


@dataclass(frozen=True)
class JetsonSettings(LinuxSettings):
    """An NVIDIA Jetson Orin NX."""

    model: str = named("npc-policy-large-int8", or_path=".tflite")


@dataclass(frozen=True)
class Arm64ImageSettings(MemoryLimited):
    """The Switch-style ARM64 image in QEMU."""

    fps_target: int = ranged(30, 1, 1000)
    stall_s: float = 30.0  # an emulated console (icount on a loaded host) can be seconds between frames
    reply_timeout_s: float = 30.0  # TCG emulation (3x slower guest clock under icount) on a shared host


@dataclass(frozen=True)
class WebSettings(MemoryLimited):
    """A browser page running the web agent (LiteRT.js on WASM); its memory limit is the WASM heap a model in
    probation may grow to."""

    update_channel: str = "websocket"
    reply_timeout_s: float = 15.0  # LiteRT.js on WASM in a loaded browser


@dataclass(frozen=True)
class Kind:
    """One device kind and everything the bench needs to serve it."""

    name: str
    description: str
    link: LinkType
    settings: type[Settings]
    driver: str | None = None  # "module:Class" of its bench.devices.base.Driver; None: no driver yet
    virtual: str | None = None  # "module:callable" (device, state folder) -> bench.virtual.VirtualDevice; None: none
    image: bool = False  # the bench builds its system image from the recipe in firmware/<name>/ (bench/image)
    opener: str | None = None  # "module:Class" of a replay agent opener (store, run_id, held=) -> .open(device)
    runtime_hint: str = ""  # what to install on a board of this kind when its agent's runtime is missing
    chip: str = ""  # the chip esptool names (e.g. "ESP32-C6"): `fleet discover` makes boards with it this kind
    runtime: str = HOST_AGENT  # its agent: host/ (Python), micropython/ or web/agent/ (one of RUNTIMES)
    # the firmware image its driver flashes when the device's `firmware` setting is "" (its settings then derive
    # from Flashed); None: the kind flashes no firmware image
    firmware: Path | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"kind {self.name!r}: runtime {self.runtime!r} is not one of {', '.join(RUNTIMES)}")
        if self.firmware is not None and not issubclass(self.settings, Flashed):
            raise ValueError(f"kind {self.name!r} flashes firmware: its settings need a `firmware` field (Flashed)")

    def firmware_image(self, settings: Settings) -> Path | None:
        """The firmware image a device of this kind with `settings` is flashed with (its `firmware` setting, a
        relative one from the checkout, else the kind's default); None when the kind flashes no firmware."""
        if self.firmware is None or not isinstance(settings, Flashed):
            return None
        configured = settings.firmware
        if not configured:
            return self.firmware
        if configured == COUNTED:
            raise ValueError("the counted firmware is built by bench.bundles.c6_firmware.device_firmware")
        path = Path(configured).expanduser()
        return path if path.is_absolute() else ROOT / path

    @property
    def family(self) -> str:
        """The link family's name: serial, ssh or qemu."""
        return self.link.family

    @property
    def model_format(self) -> str:
        """The model format its devices run unless the fleet file says otherwise."""
        return self.settings().model_format

    def defaults(self) -> Settings:
        """The kind's settings when the fleet file sets none."""
        return self.settings()

    def setting_types(self) -> dict[str, type]:
        """Field name -> its Python type, for validating a fleet file."""
        return setting_types(self.settings)

    def driver_class(self) -> type:
        """The driver class (ConfigError when the kind has none)."""
        if self.driver is None:
            raise ConfigError(f"kind {self.name!r} has no driver yet", hint=f"kinds with one: {', '.join(driven())}")
        return load(self.driver)

    def virtual_class(self) -> Any:
        """What makes the virtual stand-in: a class or function of (device, state folder) (ConfigError when
        the kind has none)."""
        if self.virtual is None:
            raise ConfigError(f"kind {self.name!r} has no virtual device yet")
        return load(self.virtual)


def load(ref: str) -> Any:
    """The attribute named by "module:attribute"."""
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)


_LINUX_HINT_JETSON = (
    "on JetPack: sudo apt install python3-pip; then python3 -m pip install --user "
    "tflite-runtime==2.13.0 (JetPack 5, Python 3.8) or ai-edge-litert==2.3.0 (JetPack 6, Python 3.10)"
)
_LINUX_HINT_PI = (
    "on Raspberry Pi OS: sudo apt install python3-venv python3-numpy; "
    "python3 -m venv --system-site-packages ~/npc-venv; ~/npc-venv/bin/pip install ai-edge-litert==2.3.0; "
    'then set python = "~/npc-venv/bin/python" for the device in the fleet file'
)

KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add `kind` to the registry (replacing one of the same name) and return it."""
    KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    """The registered kind `name`, or a ConfigError listing the known ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown device kind {name!r}", hint=f"kinds: {', '.join(KINDS)}") from None


def driven() -> list[str]:
    """Kinds the bench can flash and run agents on."""
    return [k.name for k in KINDS.values() if k.driver is not None]


def of_family(link: type[Link]) -> list[str]:
    """Kinds reached by links of type `link`."""
    return [k.name for k in KINDS.values() if k.link is link]


def _linux_board(name: str, board: str, settings: type[Settings], virtual: str, runtime_hint: str) -> Kind:
    """A Linux board reached over SSH: the Linux driver and agent opener, an OS disk image from its recipe
    (firmware/<kind>/recipe.toml), and `bench.virtual.linux:<virtual>` as its stand-in (an aarch64 guest with
    [device.os], else loopback sshd)."""
    return Kind(
        name,
        f"{board} over SSH",
        SshLink,
        settings,
        driver="bench.devices.linux:LinuxDriver",
        virtual=f"bench.virtual.linux:{virtual}",
        image=True,
        opener="bench.recovery.linux_endpoint:LinuxAgentOpener",
        runtime_hint=runtime_hint,
    )


register(
    Kind(
        "esp32c6",
        "ESP32-C6 board running MicroPython, on a serial port",
        SerialLink,
        Esp32c6Settings,
        driver="bench.devices.esp32c6:Esp32c6Driver",
        virtual="bench.virtual.esp32c6:VirtualEsp32c6",
        chip="ESP32-C6",
        runtime=MICROPYTHON_AGENT,
        firmware=ESP32C6_DEFAULT_FIRMWARE,
    )
)
register(_linux_board("jetson-orin-nx", "NVIDIA Jetson Orin NX", JetsonSettings, "virtual_jetson", _LINUX_HINT_JETSON))
register(_linux_board("pi5", "Raspberry Pi 5", Pi5Settings, "virtual_pi5", _LINUX_HINT_PI))
register(
    Kind(
        "switch-arm64",
        "Switch-style ARM64 console image (4x Cortex-A57, 4 GB) in QEMU",
        QemuLink,
        Arm64ImageSettings,
        driver="bench.devices.qemu_arm64:QemuArm64Driver",
        image=True,
    )
)
register(
    Kind(
        "web",
        "a browser page (headless Chromium) running the web agent: LiteRT.js on WASM, WebSocket link",
        BrowserLink,
        WebSettings,
        driver="bench.devices.web:WebDriver",
        virtual="bench.virtual.web:VirtualBrowser",
        runtime=WEB_AGENT,
    )
)

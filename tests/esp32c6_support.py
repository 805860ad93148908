"""Test support for ESP32-C6 boards: a virtual board process, and the real esptool / mpremote CLIs."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpremote.transport_serial import SerialTransport

from bench.agent import wire
from bench.config.fleet import Device, SerialLink
from bench.config.kinds import get_kind
from bench.core.loop_thread import LoopThread
from bench.devices.qemu_machine import free_port
from bench.energy.spec import EnergySpec
from bench.virtual.esp32c6 import VirtualEsp32c6
from bench.virtual.esp32c6.counted import qemu_command

REPO = Path(__file__).resolve().parent.parent
# the image the tests flash: the committed one (the unix-port VM), or HILBENCH_TEST_C6_FIRMWARE, e.g. the counted
# firmware's image (bench.bundles.c6_firmware.image_for), to run the same tests on the counted core
FIRMWARE = Path(os.environ.get("HILBENCH_TEST_C6_FIRMWARE") or REPO / "firmware" / "esp32c6" / "host-clock-vm.bin")


# The start of a MicroPython program that collects figures in `out` (printed as JSON at its end) and the error
# a call raises, as "Type: message", with err(fn)
PROGRAM_START = r"""
import json, machine, time
out = {}
def err(fn):
    try:
        fn()
    except Exception as e:
        return type(e).__name__ + ": " + str(e)
    return "no error"
"""

# What both virtual boards' `machine` share (firmware/esp32c6/counted/modules/_machinebase.py, which the unix-port
# VM imports too): a program printing one JSON line, run on either board, and `check_machine_base` on what it printed
MACHINE_BASE_PROGRAM = (
    PROGRAM_START
    + r"""
uart = machine.UART(1, baudrate=115200, bits=7, parity=0, stop=2, tx=5, rx=6, timeout=10)
t0 = time.ticks_us(); n = uart.write(b"x" * 100); wire_us = time.ticks_diff(time.ticks_us(), t0)
out["uart"] = [n, uart.any(), uart.read(), wire_us, repr(uart)]
out["uart_bad"] = [err(f) for f in (lambda: machine.UART(2), lambda: machine.UART(1, stop=3),
                                     lambda: machine.UART(1, bits=9), lambda: machine.UART(1, tx=26))]
ticks = []
tim = machine.Timer(0)
tim.init(mode=machine.Timer.PERIODIC, period=20, callback=lambda t: ticks.append(1))
once = []
machine.Timer(1, mode=machine.Timer.ONE_SHOT, period=10, callback=lambda t: once.append(t))
time.sleep_ms(250)
tim.deinit()
n = len(ticks)
time.sleep_ms(100)
out["timer"] = [n, len(ticks) == n, len(once), repr(once[0]) if once else None]
out["timer_bad"] = [err(lambda: machine.Timer(2)), err(lambda: machine.Timer(0, mode=5))]
out["wdt_bad"] = [err(lambda: machine.WDT(timeout=0)), err(lambda: machine.WDT(1))]
pin = machine.Pin(5, machine.Pin.OUT)
s = machine.Signal(pin, invert=True); s.on()
out["signal"] = [s.value(), pin.value(), machine.Signal(7, machine.Pin.OUT, value=1)()]
p = machine.Pin(6, machine.Pin.IN, machine.Pin.PULL_UP)
t0 = time.ticks_ms(); r = machine.time_pulse_us(p, 0, 50000)
out["pulse"] = [r, time.ticks_diff(time.ticks_ms(), t0) >= 50, machine.time_pulse_us(p, 1, 1000)]
before = machine.wake_reason(); machine.lightsleep(20)
out["wake"] = [before, machine.wake_reason(), machine.sleep is machine.lightsleep]
out["causes"] = [machine.PWRON_RESET, machine.HARD_RESET, machine.WDT_RESET, machine.DEEPSLEEP_RESET,
                 machine.SOFT_RESET]
print(json.dumps(out))
"""
)


def check_machine_base(printed: str) -> None:
    """What MACHINE_BASE_PROGRAM prints on either board, as MicroPython's esp32 port documents it."""
    out = json.loads(printed)
    n, waiting, read, wire_us, shown = out["uart"]
    # nothing is wired to the UART's pins; 100 bytes of 11 bits (start, 7 data, parity, 2 stop) at 115,200 baud
    assert (n, waiting, read, shown) == (100, 0, None, "UART(1, baudrate=115200)"), out["uart"]
    assert 9548 <= wire_us < 200_000, out["uart"]
    assert out["uart_bad"] == [
        "ValueError: UART(2) does not exist",
        "ValueError: invalid stop bits",
        "ValueError: invalid data bits",
        "ValueError: invalid pin",
    ]
    ticks, stopped, once, once_timer = out["timer"]
    assert 5 <= ticks <= 13 and stopped and once == 1 and once_timer == "Timer(1)", out["timer"]
    assert out["timer_bad"] == ["ValueError: invalid Timer number", "ValueError: invalid mode"]
    assert out["wdt_bad"] == ["ValueError: WDT timeout too short", "ValueError: "]
    assert out["signal"] == [1, 0, 1]  # active-low: on() drives the pin low
    assert out["pulse"] == [-2, True, -1]  # a pulled-up pin: a low pulse never starts, a high one never ends
    assert out["wake"] == [0, 4, True]  # TIMER_WAKE after a timed light sleep
    assert out["causes"] == [1, 2, 3, 4, 5]


def c6_device(name: str, mac: str, energy: EnergySpec | None = None, **settings: object) -> Device:
    """A virtual ESP32-C6 fleet device (kind defaults, plus `settings`), with the meter `energy`."""
    merged = get_kind("esp32c6").defaults().replace(**settings)
    return Device(name=name, kind="esp32c6", link=None, virtual=True, settings=merged, mac=mac,
                  energy=energy)  # fmt: skip


@dataclass
class Board:
    """A running virtual ESP32-C6 (its own process), driven from a background event loop."""

    device: Device
    virtual: VirtualEsp32c6
    loop: LoopThread
    link: SerialLink

    @property
    def urls(self) -> dict[str, str]:
        return self.virtual.urls()

    @property
    def fs_dir(self) -> Path:
        return self.virtual.state_dir / "fs"

    @property
    def flash_file(self) -> Path:
        return self.virtual.state_dir / "flash.bin"

    def control(self, op: str) -> dict:
        return self.loop.run(self.virtual.control(op), timeout_s=30)

    def wait_mode(self, mode: str, timeout_s: float = 10.0) -> dict:
        """Poll the control API until the board is in `mode`; the last status either way."""
        deadline = time.monotonic() + timeout_s
        status = self.control("status")
        while status["mode"] != mode and time.monotonic() < deadline:
            time.sleep(0.1)
            status = self.control("status")
        return status

    def kill(self) -> None:
        """Cut the board's power abruptly."""
        self.loop.run(self.virtual.kill(), timeout_s=30)

    def restart(self) -> None:
        """Power the board up again (same flash, same filesystem; new URLs)."""
        self.link = self.loop.run(self.virtual.start(), timeout_s=60)


def preflash(state: Path, image: bytes = b"", flash_size: int = 8 * 1024 * 1024) -> Path:
    """Give a board that is not started yet a flash chip holding `image` at 0x0 (test setup without esptool)."""
    state.mkdir(parents=True, exist_ok=True)
    flash = state / "flash.bin"
    flash.write_bytes(image + b"\xff" * (flash_size - len(image)))
    return state


@contextlib.contextmanager
def virtual_c6(
    state: Path,
    name: str = "c6-t",
    mac: str = "60:55:f9:c6:10:01",
    energy: EnergySpec | None = None,
    **settings: object,
) -> Iterator[Board]:
    """Start a virtual ESP32-C6 keeping its flash in `state` (its PPK2 as `energy` says); stop it afterwards."""
    device = c6_device(name, mac, energy, **settings)
    loop = LoopThread()
    virtual = VirtualEsp32c6(device, state)
    try:
        link = loop.run(virtual.start(), timeout_s=60)
        yield Board(device.with_link(link), virtual, loop, link)
    finally:
        with contextlib.suppress(Exception):
            loop.run(virtual.stop(), timeout_s=30)
        loop.close()


def counted_image() -> Path:
    """The flashable image of the counted firmware (built once, then cached): what a virtual C6 runs by default,
    MicroPython's own ESP32-C6 build where the chip would run it."""
    from bench.bundles.c6_firmware import build_firmware, image_for

    return image_for(build_firmware().elf)


@contextlib.contextmanager
def app_board(
    state: Path, name: str = "c6-t", mac: str = "60:55:f9:c6:10:01", image: Path | None = None
) -> Iterator[Board]:
    """A virtual ESP32-C6 with `image` (default: the tests' FIRMWARE) preflashed in `state` (esptool's part is
    tested elsewhere), started and in its app."""
    with virtual_c6(preflash(state, (image or FIRMWARE).read_bytes()), name=name, mac=mac) as running:
        assert running.wait_mode("app", timeout_s=60)["mode"] == "app"
        yield running


def board_sha256(board: Board, path: str, port: str = "socket") -> str | None:
    """The sha256 (hex) of the file at `path` on `board`'s own filesystem, computed on the board through the real
    mpremote, as one checks a chip's files; None when there is no such file."""
    code = (
        f"import hashlib\ntry:\n    f = open({path!r}, 'rb')\nexcept OSError:\n    print('absent')\nelse:\n"
        "    h = hashlib.sha256()\n    while b := f.read(1024):\n        h.update(b)\n    print(h.digest().hex())"
    )
    printed = run_on(board, code, port=port).strip()
    return None if printed == "absent" else printed


def run_on(board: Board, code: str, port: str = "socket", timeout_s: float = 60) -> str:
    """What `code` printed, run on `board`'s REPL over its `port` URL with the real mpremote (exit 0 asserted)."""
    ran = mpremote("connect", board.urls[port], "exec", code, timeout_s=timeout_s)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def console_socket(port: int) -> str:
    """The QEMU backend putting the guest's console on a loopback TCP socket at `port` (a serial tool connects
    later)."""
    return f"socket,host=127.0.0.1,port={port},server=on,wait=off"


@contextlib.contextmanager
def counted_repl(elf: Path, pass_fds: tuple[int, ...] = (), **qemu: Any) -> Iterator[SerialTransport]:
    """The counted firmware `elf` in qemu-system-riscv32 (qemu_command with `qemu`) with its console on a loopback
    socket, opened by mpremote's serial transport and in the raw REPL; QEMU is stopped afterwards."""
    port = free_port()
    proc = subprocess.Popen(qemu_command(elf, console=console_socket(port), **qemu), pass_fds=pass_fds)
    transport = None
    try:
        deadline = time.monotonic() + 20
        while transport is None:
            try:
                transport = SerialTransport(f"socket://127.0.0.1:{port}", baudrate=115200)
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        transport.enter_raw_repl(soft_reset=False)
        yield transport
    finally:
        if transport is not None:
            transport.close()
        proc.terminate()
        proc.wait(timeout=10)


def run_on_fresh_board(image: bytes, files: Sequence[Path], code: str) -> subprocess.CompletedProcess[str]:
    """`code` run with the real mpremote on a new virtual ESP32-C6 with `image` preflashed, once `files` are
    copied to its filesystem's root (RuntimeError naming a file that could not be copied)."""
    with tempfile.TemporaryDirectory() as tmp, virtual_c6(preflash(Path(tmp), image)) as board:
        board.wait_mode("app", timeout_s=60)
        port = board.urls["socket"]
        for path in files:
            copied = mpremote("connect", port, "fs", "cp", str(path), ":" + path.name, timeout_s=300)
            if copied.returncode != 0:
                raise RuntimeError(f"mpremote cp {path.name}: {copied.stderr.strip()[-300:]}")
        return mpremote("connect", port, "exec", code, timeout_s=900)


def esptool(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real esptool CLI."""
    return subprocess.run(
        [sys.executable, "-m", "esptool", *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO
    )


def mpremote(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real mpremote CLI."""
    return subprocess.run(
        [sys.executable, "-m", "mpremote", *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO
    )


def qemu_pids(state: Path) -> list[int]:
    """QEMU processes running a core of the board whose state folder is `state`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"qemu-system-riscv32") and str(state).encode() in b" ".join(argv):
                pids.append(int(entry.name))
    return pids


# a viper dot product of two byte arrays, NAME(a, b, n): RV32 machine code on the counted core, by its own emitter or
# by mpy-cross -march=rv32imc
VIPER_DOT = """
@micropython.viper
def NAME(a, b, n: int) -> int:
    pa = ptr8(a)
    pb = ptr8(b)
    s = 0
    for i in range(n):
        s += pa[i] * pb[i]
    return s
"""


class AgentMessages:
    """The agent's wire messages on a counted board's console (`serial`), one at a time; other output is skipped."""

    def __init__(self, serial: Any) -> None:
        self.serial = serial
        self.pending = b""

    def next(self, timeout_s: float) -> dict:
        """The next message (AssertionError naming what came instead when none comes within `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                if wire.is_message(line + b"\n"):
                    return wire.decode(line)
            self.pending += self.serial.read(self.serial.in_waiting or 1)
        raise AssertionError(f"no message from the agent within {timeout_s:.0f} s: {self.pending[-300:]!r}")

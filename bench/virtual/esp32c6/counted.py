"""The counted ESP32-C6 core: the bench's RV32IMAC MicroPython firmware (bench.bundles.c6_firmware) run by
qemu-system-riscv32 under -icount, so the chip's time comes from the instructions it runs. This module knows
its command line, what the board hands the firmware at boot, and what the firmware's exit codes ask for."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

QEMU = "qemu-system-riscv32"
RAM = "16M"  # QEMU virt RAM; the firmware uses 1 MB of code and the chip's 512 KB of SRAM of it
BOOTINFO_ADDR = 0x80800000  # firmware/esp32c6/counted/link.ld BOARDIO
BOOTINFO_MAGIC = 0x49423643  # "C6BI"
ENTROPY_BYTES = 16  # c6_bootinfo_t.entropy
STATUS_ADDR = 0x80800100
STATUS_MAGIC = 0x54533643  # "C6ST"
STATUS_FORMAT = "<IIQII"  # magic, state, idle_end_q, events, gpio (virt.h c6_status_t)
EVENTS_ADDR = 0x80800200  # the ring of events (virt.h c6_events, link.ld)
EVENT_FORMAT = "<QQII"  # chip_q, busy_cycles, state, gpio (virt.h c6_event_t)
EVENT_SIZE = struct.calcsize(EVENT_FORMAT)
EVENTS = 2048  # the ring's length (virt.h C6_EVENTS)
Q_PER_NS = 4  # the counted clock's unit: a quarter nanosecond (one 160 MHz cycle is 25)
Q_PER_CYCLE = 25
UNBOUNDED = (1 << 64) - 1  # an idle only input ends


class ResetCause(IntEnum):
    """machine.reset_cause() values of MicroPython's esp32 port (the board hands one to the firmware)."""

    USB = 0  # the esp32 port maps the USB-Serial-JTAG reset to no constant
    PWRON_RESET = 1
    HARD_RESET = 2
    WDT_RESET = 3
    DEEPSLEEP_RESET = 4
    SOFT_RESET = 5


class FirmwareExit(IntEnum):
    """The QEMU exit code with which the firmware asks the board for something (virt.h EXIT_*)."""

    RESET = 8  # machine.reset(): reboot, rst:0xc (SW_CPU)
    BOOTLOADER = 9  # machine.bootloader(): reboot into the ROM's download mode
    WDT = 10  # the task watchdog was not fed (the firmware printed the panic lines)
    DEEPSLEEP = 11  # machine.deepsleep()'s timer woke the chip: reboot as a deep-sleep wake
    PANIC = 12  # a CPU exception (the firmware printed a Guru Meditation line)


class CoreState(IntEnum):
    """What the core is doing, from the status block."""

    RUN = 0
    IDLE = 1
    DEEPSLEEP = 2


@dataclass(frozen=True)
class Vfs:
    """The flash region the firmware's filesystem lives in: `size` bytes of `path` from `offset`."""

    path: Path
    offset: int
    size: int


@dataclass(frozen=True)
class CoreStatus:
    """The firmware's status block: what the core does, how many events it has written to the ring, the GPIOs'
    output levels, and while it idles the counted time (quarter ns) by which the idle ends at the latest
    (UNBOUNDED when only input ends it)."""

    state: CoreState
    idle_end_q: int
    events: int
    gpio: int

    @classmethod
    def parse(cls, data: bytes) -> CoreStatus | None:
        """From the block's bytes; None before the firmware wrote it."""
        magic, state, idle_end_q, events, gpio = struct.unpack(STATUS_FORMAT, data[: struct.calcsize(STATUS_FORMAT)])
        if magic != STATUS_MAGIC or state not in CoreState._value2member_map_:
            return None
        return cls(CoreState(state), idle_end_q, events, gpio)


@dataclass(frozen=True)
class CoreEvent:
    """One event of the ring: the counted clock (quarter ns) and the instructions run at a change of the core's
    state or of a GPIO's output level, and both from then on."""

    chip_q: int
    busy_cycles: int
    state: CoreState
    gpio: int

    @classmethod
    def parse_all(cls, data: bytes) -> list[CoreEvent]:
        """The events packed in `data` (whole ones only); one with a state the firmware never writes ends them
        (a torn read)."""
        out = []
        for chip_q, busy, state, gpio in struct.iter_unpack(EVENT_FORMAT, data[: len(data) // EVENT_SIZE * EVENT_SIZE]):
            if state not in CoreState._value2member_map_:
                break
            out.append(cls(chip_q, busy, CoreState(state), gpio))
        return out


def qemu_command(
    elf: Path,
    *,
    mac: bytes,
    reset_cause: ResetCause = ResetCause.PWRON_RESET,
    vfs: Vfs | None = None,
    console: str = "stdio",
    qmp: Path | None = None,
    wifi_fd: int | None = None,
) -> list[str]:
    """The qemu-system-riscv32 command line that runs the firmware `elf`.

    `console`: the QEMU character device backend the chip's console is on (default "stdio": QEMU's stdin and
    stdout, raw bytes; "socket,host=...,port=..." a TCP socket). The console is a virtio console, the first
    device on the command line, so the firmware finds it in the highest virtio slot (console.c). `vfs`: the flash
    region the filesystem lives in (a virtio block device over exactly that range: the guest reaches no other
    host file). `qmp`: a QMP socket to read the status block with (`xp`). `wifi_fd`: an inherited stream socket
    that is the board's Wi-Fi, the packet pipe of the firmware's `socket` module (port 0 of a virtio console;
    bench.virtual.esp32c6.wifi is the other end); without it the board has no network."""
    if len(mac) != 6:
        raise ValueError(f"mac must be 6 bytes, got {len(mac)}")
    cmd = [
        QEMU, "-M", "virt", "-m", RAM, "-smp", "1", "-bios", "none", "-nodefaults", "-no-reboot",
        "-icount", "shift=0,sleep=on",  # 1 instruction = 1 ns of virtual time; idle passes at wall time
        "-display", "none", "-monitor", "none",
        "-kernel", str(elf),
        "-chardev", f"{console},id=console",
        "-device", "virtio-serial-device,max_ports=1,id=console-bus",
        "-device", "virtconsole,chardev=console,nr=0,bus=console-bus.0",
    ]  # fmt: skip
    cmd += _loader(BOOTINFO_ADDR, BOOTINFO_MAGIC, 4)
    cmd += _loader(BOOTINFO_ADDR + 4, int(reset_cause), 4)
    cmd += _loader(BOOTINFO_ADDR + 8, int.from_bytes(mac, "little"), 8)
    # what the chip's hardware RNG gives its MicroPython: other numbers at every boot (os.urandom, random's seed)
    for i in range(0, ENTROPY_BYTES, 8):
        cmd += _loader(BOOTINFO_ADDR + 16 + i, int.from_bytes(os.urandom(8), "little"), 8)
    if vfs is not None:
        cmd += [
            "-blockdev", f"driver=file,node-name=flashfile,filename={vfs.path},locking=off",
            "-blockdev", f"driver=raw,node-name=vfs,file=flashfile,offset={vfs.offset},size={vfs.size}",
            "-device", "virtio-blk-device,drive=vfs",
        ]  # fmt: skip
    if wifi_fd is not None:
        cmd += [
            "-chardev", f"socket,id=wifi,fd={wifi_fd}",
            "-device", "virtio-serial-device,max_ports=1,id=wifi-bus",
            "-device", "virtconsole,chardev=wifi,nr=0,bus=wifi-bus.0",
        ]  # fmt: skip
    if qmp is not None:
        cmd += ["-qmp", f"unix:{qmp},server=on,wait=off"]
    return cmd


def _loader(addr: int, value: int, size: int) -> list[str]:
    return ["-device", f"loader,addr={addr:#x},data={value:#x},data-len={size}"]

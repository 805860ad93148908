"""The counted ESP32-C6 firmware (MicroPython built for RV32IMAC from its pinned sdist) in qemu-system-riscv32
-icount, driven through mpremote's own serial transport as a board is: it boots to the esp32 port's banner,
runs code over the raw REPL and raw-paste, compiles viper to RV32, keeps its files in the flash partition, and
its counted clock gives the same ticks on every run."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mpremote.transport_serial import SerialTransport

from bench.image.c6_firmware import BuiltFirmware, build_firmware
from bench.virtual.esp32c6.counted import FirmwareExit, ResetCause, Vfs, qemu_command

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]

MAC = bytes.fromhex("6055f9c61001")
FLASH_SIZE = 8 * 1024 * 1024
VFS_OFFSET = 0x200000


@pytest.fixture(scope="module")
def firmware() -> BuiltFirmware:
    return build_firmware()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blank_flash(path: Path) -> Vfs:
    path.write_bytes(b"\xff" * FLASH_SIZE)
    return Vfs(path, VFS_OFFSET, FLASH_SIZE - VFS_OFFSET)


@contextlib.contextmanager
def board(elf: Path, vfs: Vfs | None = None, cause: ResetCause = ResetCause.PWRON_RESET) -> Iterator[SerialTransport]:
    """The firmware in QEMU with its UART on a loopback socket, opened by mpremote's serial transport."""
    port = _free_port()
    serial = ("-chardev", f"socket,id=u,host=127.0.0.1,port={port},server=on,wait=off", "-serial", "chardev:u")
    proc = subprocess.Popen(qemu_command(elf, mac=MAC, reset_cause=cause, vfs=vfs, serial=serial))
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


def run(transport: SerialTransport, code: str) -> str:
    return transport.exec(code).decode()


def test_boots_to_the_esp32_banner(firmware: BuiltFirmware):
    cmd = qemu_command(firmware.elf, mac=MAC, serial=("-serial", "stdio"))
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + 20
        while not seen.endswith(b">>> ") and time.monotonic() < deadline:
            seen += proc.stdout.read1(256)
    finally:
        proc.kill()
        proc.wait()
    assert b"MicroPython v1.29.0-preview on 2026-01-01; ESP32C6 module with ESP32C6\r\n" in seen
    assert seen.endswith(b'Type "help()" for more information.\r\n>>> ')


def test_raw_repl_and_raw_paste_run_code_and_identify_as_an_esp32c6(firmware: BuiltFirmware):
    with board(firmware.elf, cause=ResetCause.HARD_RESET) as t:
        out = run(t, "import sys, os, machine\nprint(sys.platform, os.uname().sysname, sys.implementation._machine)")
        assert t.use_raw_paste  # mpremote fell back to the plain raw REPL if the board refused raw-paste
        assert out.strip() == "esp32 esp32 ESP32C6 module with ESP32C6"
        assert t.eval("sys.implementation._build") == "ESP32_GENERIC_C6"
        assert t.eval("machine.unique_id()") == MAC
        assert t.eval("machine.reset_cause()") == int(ResetCause.HARD_RESET)
        assert t.eval("machine.freq()") == 160_000_000


VIPER = """
import micropython, sys, time
@micropython.viper
def mac_viper(a, b, n: int) -> int:
    pa = ptr8(a)
    pb = ptr8(b)
    s = 0
    for i in range(n):
        s += pa[i] * pb[i]
    return s
def mac_bytecode(a, b, n):
    s = 0
    for i in range(n):
        s += a[i] * b[i]
    return s
a = bytes(range(200)); b = bytes(range(200, 0, -1))
c0 = time.ticks_cpu(); v = mac_viper(a, b, 200); c1 = time.ticks_cpu()
p = mac_bytecode(a, b, 200); c2 = time.ticks_cpu()
print(sys.implementation._mpy >> 10 & 15, v == p, time.ticks_diff(c1, c0), time.ticks_diff(c2, c1))
"""


def test_viper_is_compiled_by_the_rv32_emitter(firmware: BuiltFirmware):
    with board(firmware.elf) as t:
        arch, same, viper_cycles, bytecode_cycles = run(t, VIPER).split()
    assert arch == "11"  # MP_NATIVE_ARCH_RV32IMC: native and viper code is emitted for the chip's core
    assert same == "True"
    assert int(viper_cycles) * 5 < int(bytecode_cycles)  # the same loop as RV32 machine code, not bytecode


COUNTED = """
import time
def work():
    s = 0
    for i in range(3000):
        s += i * i
    return s
c0 = time.ticks_cpu(); t0 = time.ticks_us()
work()
busy = time.ticks_diff(time.ticks_cpu(), c0), time.ticks_diff(time.ticks_us(), t0)
t0 = time.ticks_us(); time.sleep_ms(30); work(); time.sleep_us(700)
print(busy[0], busy[1], time.ticks_diff(time.ticks_us(), t0))
"""


def test_counted_ticks_are_the_same_on_every_boot(firmware: BuiltFirmware):
    runs = []
    for _ in range(3):
        with board(firmware.elf) as t:
            runs.append(tuple(int(x) for x in run(t, COUNTED).split()))
    assert runs[0] == runs[1] == runs[2], runs
    cycles, busy_us, with_sleeps_us = runs[0]
    assert abs(cycles / 160 - busy_us) < 10  # ticks_cpu counts the chip's 160 MHz cycles (windows differ by a call)
    assert with_sleeps_us - busy_us - 30_700 in range(0, 200)  # the sleeps added their own time (and calls)


def test_files_live_in_the_flash_partition_across_power_cycles(firmware: BuiltFirmware, tmp_path: Path):
    vfs = blank_flash(tmp_path / "flash.bin")
    with board(firmware.elf, vfs) as t:
        run(t, "import os")
        assert t.eval("os.statvfs('/')[:3]") == (4096, 4096, 1536)  # the 6 MB partition in 4 KB blocks
        t.fs_mkdir("lib")
        t.fs_writefile("lib/data.bin", bytes(range(256)) * 40)
        assert run(t, "os.rename('lib/data.bin', '/lib/moved.bin')") == ""
    raw = (tmp_path / "flash.bin").read_bytes()
    assert raw[:VFS_OFFSET] == b"\xff" * VFS_OFFSET  # nothing outside the vfs partition was written
    assert b"littlefs" in raw[VFS_OFFSET : VFS_OFFSET + 8192]  # the superblock, at the partition's start
    with board(firmware.elf, vfs) as t:
        assert [(e.name, e.st_size) for e in t.fs_listdir("/lib")] == [("moved.bin", 10240)]
        assert t.fs_readfile("/lib/moved.bin") == bytes(range(256)) * 40
        run(t, "import os")
        free = t.eval("os.statvfs('/')[3]")
        assert 1500 < free < 1536
        with pytest.raises(OSError, match="Errno 2"):
            t.fs_stat("/nope")


def test_machine_reset_and_bootloader_end_qemu_with_their_exit_codes(firmware: BuiltFirmware):
    for call, code in (("machine.reset()", FirmwareExit.RESET), ("machine.bootloader()", FirmwareExit.BOOTLOADER)):
        cmd = qemu_command(firmware.elf, mac=MAC, serial=("-serial", "stdio"))
        done = subprocess.run(cmd, input=f"import machine\r{call}\r".encode(), capture_output=True, timeout=30)
        assert done.returncode == code, done.stdout[-300:]

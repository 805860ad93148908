"""The real mpremote CLI against a virtual ESP32-C6 running the counted firmware (MicroPython's own ESP32-C6
build, where the chip would run it), over socket://, rfc2217:// and a pty; its files are checked on the board."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import serial

from tests.esp32c6_support import Board, board_sha256, esptool, mpremote

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def c6_board(counted_c6_board: Board) -> Board:
    return counted_c6_board


@pytest.fixture(params=["socket", "rfc2217", "pty"])
def port(request: pytest.FixtureRequest, c6_board: Board) -> str:
    return c6_board.urls[request.param]


def test_exec_sees_board_identity_and_its_own_folder(port: str, c6_board: Board) -> None:
    made = mpremote("connect", port, "exec", "open('marker.txt', 'w').write('x')")
    assert made.returncode == 0, made.stdout + made.stderr
    ran = mpremote("connect", port, "exec", "import machine, os; print(machine.unique_id().hex(), os.listdir('/'))")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.split()[0] == c6_board.device.mac.replace(":", "")
    assert "'marker.txt'" in ran.stdout
    escape = mpremote("connect", port, "exec", "print(open('/../../../etc/hostname').read())")
    assert escape.returncode != 0  # the host's files are not the board's


def test_fs_cp_ls_run_and_errors(port: str, c6_board: Board, tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('hello from', 6 * 7)\n")
    name = "hello_" + "".join(c if c.isalnum() else "_" for c in port.split(":")[0]) + ".py"
    cp = mpremote("connect", port, "fs", "cp", str(script), f":{name}")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert board_sha256(c6_board, name) == hashlib.sha256(script.read_bytes()).hexdigest()  # on the board's flash
    ls = mpremote("connect", port, "fs", "ls", ":")
    assert ls.returncode == 0, ls.stdout + ls.stderr
    sizes = {line.split()[-1]: int(line.split()[0]) for line in ls.stdout.splitlines()[1:] if line.strip()}
    assert sizes[name] == script.stat().st_size
    run = mpremote("connect", port, "run", str(script))
    assert run.returncode == 0 and run.stdout.strip() == "hello from 42"
    back = tmp_path / "back.py"
    get = mpremote("connect", port, "fs", "cp", f":{name}", str(back))
    assert get.returncode == 0 and back.read_bytes() == script.read_bytes()
    failing = mpremote("connect", port, "exec", "1/0")
    assert failing.returncode == 1 and "ZeroDivisionError" in failing.stdout + failing.stderr


def test_soft_reset_gives_a_fresh_vm(port: str) -> None:
    kept = mpremote("connect", port, "exec", "x = 41", "+", "exec", "print(x + 1)")
    assert kept.returncode == 0 and kept.stdout.strip() == "42"
    reset = mpremote("connect", port, "exec", "y = 1", "+", "soft-reset", "+", "exec", "print('y' in globals())")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert reset.stdout.strip() == "False"


def test_machine_reset_reboots_and_bootloader_enters_download_mode(c6_board: Board) -> None:
    port = c6_board.urls["socket"]
    reset = mpremote("connect", port, "reset")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert c6_board.wait_mode("app")["mode"] == "app"
    assert "rst:0xc (SW_CPU),boot:0x6c" in c6_board.control("log")["log"]
    mpremote("connect", port, "bootloader")
    assert c6_board.wait_mode("download")["mode"] == "download"
    # the ROM loader itself answers (--no-stub): a stub upload gives the board 0.2 s to answer its MEM_END (esptool's
    # mem_end_rom_timeout; silicon answers in microseconds), which a board in a starved test process can miss, and
    # esptool's reader is then spent: "Failed to start stub flasher. There was no response." (the stub: test_esptool)
    chip = esptool("--port", port, "--before", "no-reset", "--no-stub", "chip-id")
    assert chip.returncode == 0 and "ESP32-C6" in chip.stdout
    c6_board.control("boot")
    assert c6_board.wait_mode("app")["mode"] == "app"


def test_control_api_holds_in_reset_and_power_cycles(c6_board: Board) -> None:
    c6_board.control("hold_reset")
    assert c6_board.control("status")["mode"] == "reset"
    port = serial.serial_for_url(c6_board.urls["socket"], timeout=1.0)
    try:
        port.write(b"\r\x03\r\x01")
        assert port.read(4096) == b""  # a chip held in reset says nothing
        c6_board.control("power_cycle")
        assert c6_board.wait_mode("app")["mode"] == "app"
        assert b"rst:0x1 (POWERON)" in port.read_until(b">>> ")
    finally:
        port.close()

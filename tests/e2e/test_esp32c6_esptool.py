"""The real esptool CLI against a virtual ESP32-C6, over socket:// and rfc2217://: it writes the counted firmware
(MicroPython's own ESP32-C6 build, what the chip would run), and erase-flash wipes that firmware's littlefs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.devices.esp_image import parse_image
from bench.devices.esptool_link import open_port
from tests.esp32c6_support import Board, board_sha256, counted_image, esptool, mpremote, virtual_c6

pytestmark = pytest.mark.e2e
MAC = "60:55:f9:c6:10:01"
VFS_OFFSET = 0x200000  # the vfs partition, from the end of the app partition to the end of the flash


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory):
    with virtual_c6(tmp_path_factory.mktemp("c6"), mac=MAC) as running:
        yield running


def socket_in_download_mode(board: Board) -> str:
    """socket:// has no modem lines (esptool forces --before no-reset): strap the board from the bench."""
    board.control("download")
    return board.urls["socket"]


def test_identity_over_socket(board: Board) -> None:
    port = socket_in_download_mode(board)
    chip = esptool("--port", port, "chip-id")
    assert chip.returncode == 0, chip.stdout + chip.stderr
    assert "ESP32-C6" in chip.stdout
    mac = esptool("--port", port, "read-mac")
    assert mac.returncode == 0, mac.stdout + mac.stderr
    assert f"BASE MAC:           {MAC}" in mac.stdout
    flash = esptool("--port", port, "flash-id")
    assert flash.returncode == 0, flash.stdout + flash.stderr
    assert "Manufacturer: ef" in flash.stdout
    assert "Detected flash size: 8MB" in flash.stdout


def test_write_verify_read_with_stub(board: Board, tmp_path: Path) -> None:
    port = socket_in_download_mode(board)
    data = os.urandom(50_000) + bytes(30_000)  # random and compressible parts
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    write = esptool("--port", port, "write-flash", "0x20000", str(src))
    assert write.returncode == 0, write.stdout + write.stderr
    assert "Hash of data verified" in write.stdout
    verify = esptool("--port", port, "verify-flash", "0x20000", str(src))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    back = tmp_path / "back.bin"
    read = esptool("--port", port, "read-flash", "0x20000", str(len(data)), str(back))
    assert read.returncode == 0, read.stdout + read.stderr
    assert back.read_bytes() == data
    assert board.flash_file.read_bytes()[0x20000 : 0x20000 + len(data)] == data


def test_write_and_read_without_stub(board: Board, tmp_path: Path) -> None:
    port = socket_in_download_mode(board)
    data = os.urandom(6000)
    src = tmp_path / "rom.bin"
    src.write_bytes(data)
    write = esptool("--port", port, "--no-stub", "write-flash", "0x40000", str(src))
    assert write.returncode == 0, write.stdout + write.stderr
    back = tmp_path / "rom-back.bin"
    read = esptool("--port", port, "--no-stub", "read-flash", "0x40000", "1024", str(back))
    assert read.returncode == 0, read.stdout + read.stderr
    assert back.read_bytes() == data[:1024]
    verify = esptool("--port", port, "--no-stub", "verify-flash", "0x40000", str(src))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_flash_over_rfc2217_resets_into_micropython(board: Board) -> None:
    """Classic DTR/RTS auto-reset into download mode, write, hard reset: the board runs the new firmware."""
    port = board.urls["rfc2217"]
    write = esptool("--port", port, "write-flash", "0x0", str(counted_image()))
    assert write.returncode == 0, write.stdout + write.stderr
    assert "Hash of data verified" in write.stdout
    assert "Chip type:          ESP32-C6" in write.stdout and f"BASE MAC:           {MAC}" in write.stdout
    assert board.wait_mode("app")["mode"] == "app"
    ran = mpremote("connect", port, "exec", "import machine; print(machine.unique_id().hex())")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip() == MAC.replace(":", "")
    assert parse_image(board.flash_file.read_bytes()).chip_name == "ESP32-C6"


def test_erase_flash_wipes_filesystem_and_boot_loops(board: Board, tmp_path: Path) -> None:
    board.control("boot")
    board.wait_mode("app")
    note = tmp_path / "note.txt"
    note.write_text("kept until erase\n")
    put = mpremote("connect", board.urls["socket"], "fs", "cp", str(note), ":note.txt")
    assert put.returncode == 0, put.stdout + put.stderr
    assert board_sha256(board, "note.txt") is not None  # on the board's littlefs
    port = socket_in_download_mode(board)
    superblock = tmp_path / "superblock.bin"
    read = esptool("--port", port, "read-flash", hex(VFS_OFFSET), "8192", str(superblock))  # its two blocks
    assert read.returncode == 0 and b"littlefs" in superblock.read_bytes(), read.stdout + read.stderr
    erase = esptool("--port", port, "erase-flash")
    assert erase.returncode == 0, erase.stdout + erase.stderr
    for offset in (0, VFS_OFFSET):  # the firmware and its filesystem are gone
        back = tmp_path / f"erased-{offset:x}.bin"
        read = esptool("--port", port, "read-flash", hex(offset), "4096", str(back))
        assert read.returncode == 0, read.stdout + read.stderr
        assert back.read_bytes() == b"\xff" * 4096
    board.control("boot")
    assert board.wait_mode("boot-loop")["mode"] == "boot-loop"
    write = esptool("--port", socket_in_download_mode(board), "write-flash", "0x0", str(counted_image()))
    assert write.returncode == 0, write.stdout + write.stderr
    board.control("boot")
    assert board.wait_mode("app", timeout_s=60)["mode"] == "app"
    assert board_sha256(board, "note.txt") is None  # the firmware formatted an erased partition at boot


def test_bench_rfc2217_port_negotiates_settings_not_timeouts(board: Board) -> None:
    """esptool changes the read timeout on every command; only real settings changes go to the server
    (pyserial's stock client renegotiates everything on each change, ~0.2 s a command)."""
    port = open_port(board.urls["rfc2217"])
    sent: list[bytes] = []
    raw_write = port._internal_raw_write
    port._internal_raw_write = lambda data: (sent.append(bytes(data)), raw_write(data))[1]
    try:
        for timeout in (0.1, 3.0, 0.5):
            port.timeout = timeout
        assert sent == []
        port.baudrate = 460800
        assert sent  # the baud rate is negotiated with the server
    finally:
        port.close()

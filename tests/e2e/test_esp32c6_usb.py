"""Both USB personalities of the virtual ESP32-C6 with the real tools: bare esptool (its default reset and
`usb-reset`), mpremote, the ROM's boot lines on the console, and a clean `esptool image-info`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.config.kinds import UART_BRIDGE, USB_SERIAL_JTAG
from tests.esp32c6_support import FIRMWARE, Board, esptool, mpremote, preflash, virtual_c6

pytestmark = pytest.mark.e2e
MAC = "60:55:f9:c6:20:01"
# what each personality's reset looks like on the console: EN pulled low by the bridge is a power-on reset
RESET_LINE = {UART_BRIDGE: "rst:0x1 (POWERON)", USB_SERIAL_JTAG: "rst:0x15 (USB_UART_HPSYS)"}


def wait_for_log(board: Board, text: str, after: int, timeout_s: float = 15.0) -> str:
    """The console log past byte `after`, once it contains `text` (or as it is when time runs out)."""
    deadline = time.monotonic() + timeout_s
    while True:
        log = board.control("log")["log"][after:]
        if text in log or time.monotonic() > deadline:
            return log
        time.sleep(0.2)


# the UART bridge is the personality every other ESP32-C6 test flashes through: opt-in here (--run-slow)
@pytest.mark.parametrize("usb", [pytest.param(UART_BRIDGE, marks=pytest.mark.slow), USB_SERIAL_JTAG])
def test_bare_esptool_then_mpremote_on_each_usb_personality(usb: str, tmp_path: Path) -> None:
    with virtual_c6(tmp_path / "state", mac=MAC, usb=usb) as board:
        assert board.wait_mode("boot-loop")["mode"] == "boot-loop"  # blank flash: the ROM's invalid-header loop
        start = len(board.control("log")["log"])
        write = esptool("--port", board.urls["rfc2217"], "write-flash", "0x0", str(FIRMWARE))  # default reset
        assert write.returncode == 0, write.stdout + write.stderr
        assert "Hash of data verified" in write.stdout
        console = wait_for_log(board, 'Type "help()"', start)
        # esptool's reset into the loader, then its hard reset into the firmware: the ROM speaks both times
        assert f"{RESET_LINE[usb]},boot:0x5 (DOWNLOAD(USB/UART/SDIO_REI_FEO))\r\n" in console, console
        booted = console[console.index("boot:0x6c") :]
        assert booted.startswith("boot:0x6c (SPI_FAST_FLASH_BOOT)\r\n"), console
        for line in ("SPIWP:0xee", "mode:DIO, clock div:2", "load:0x40800000,len:0x4", "entry 0x40800000"):
            assert f"{line}\r\n" in booted, booted
        assert "ESP32C6 module with ESP32C6 (npc-hil-bench virtual firmware)\r\n" in booted
        run = mpremote(
            "connect", board.urls["rfc2217"], "exec", "import machine; print(machine.unique_id().hex(), end='')"
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout == MAC.replace(":", "")
        explicit = esptool(
            "--port", board.urls["rfc2217"], "--before", "usb-reset", "--connect-attempts", "1", "chip-id"
        )
        if usb == USB_SERIAL_JTAG:
            assert explicit.returncode == 0, explicit.stdout + explicit.stderr
        else:  # a bridge's auto-reset circuit does not decode the USB-Serial-JTAG sequence: the chip boots the app
            assert explicit.returncode != 0 and "Failed to connect" in explicit.stdout + explicit.stderr


def test_program_output_has_the_boards_line_endings(tmp_path: Path) -> None:
    """MicroPython's stdout turns \\n into \\r\\n on the chip; the console log shows the raw bytes."""
    state = preflash(tmp_path / "state", FIRMWARE.read_bytes())
    (state / "fs").mkdir()
    (state / "fs" / "main.py").write_text("print('one')\nprint('two')\n")
    with virtual_c6(state, mac=MAC, usb=USB_SERIAL_JTAG) as board:
        console = wait_for_log(board, ">>> ", 0)
        assert console.startswith("ESP-ROM:esp32c6-20220919\r\nBuild:Sep 19 2022\r\nrst:0x1 (POWERON)"), console
        assert "one\r\ntwo\r\n" in console, console


def test_image_info_reads_the_virtual_firmware_without_a_warning() -> None:
    info = esptool("image-info", str(FIRMWARE))
    assert info.returncode == 0, info.stdout + info.stderr
    assert "WARNING" not in info.stdout + info.stderr
    for line in ("Flash size: 4MB", "Flash freq: 80m", "Flash mode: DIO", "Maximal chip revision: v0.99"):
        assert line in info.stdout

"""What the ESP32-C6 prints and decides at reset: ROM banner, image check at 0x0, boot loop text.

The firmware descriptor: the virtual firmware image carries `FIRMWARE_MARKER` + banner text + NUL in
a data segment; the board prints that banner. Any other valid ESP32-C6 image (e.g. the official
MicroPython build) boots the same VM with the default banner.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.devices.esp_image import ESP32C6_CHIP_ID, ImageError, ImageInfo, parse_image

FIRMWARE_MARKER = b"NPC-VIRTUAL-FIRMWARE:"
DEFAULT_BANNER = "MicroPython v1.29.0 on 2026-01-01; ESP32C6 module with ESP32C6"
ROM_VERSION = b"ESP-ROM:esp32c6-20220919\r\nBuild:Sep 19 2022\r\n"
SAVED_PC = b"Saved PC:0x4001975a\r\n"  # printed after any reset but power-on


@dataclass(frozen=True)
class RomReset:
    """One way the chip resets: the ROM's `rst:` code and name, and what MicroPython's reset_cause() says."""

    code: int
    name: str
    machine_cause: int  # machine.PWRON_RESET=1, HARD_RESET=2, WDT_RESET=3; 0 for reasons the port maps to none


RESET_CAUSES = {
    "poweron": RomReset(0x1, "POWERON", 1),  # power applied, or EN (CHIP_PU) pulled low by a UART bridge's RTS
    "software": RomReset(0xC, "SW_CPU", 2),  # machine.reset() (esp_restart)
    "usb": RomReset(0x15, "USB_UART_HPSYS", 0),  # the USB-Serial-JTAG port's RTS (esp_reset_reason: USB)
    "task_wdt": RomReset(0xC, "SW_CPU", 3),  # machine.WDT expired: panic handler, then esp_restart
    "panic": RomReset(0xC, "SW_CPU", 3),  # a CPU exception: panic handler, esp_restart (esp32 port: WDT_RESET)
    "deepsleep": RomReset(0x5, "SLEEP_WAKEUP", 4),  # machine.deepsleep()'s timer woke the chip (DEEPSLEEP_RESET)
}
BOOT_MODE_FLASH = b"boot:0x6c (SPI_FAST_FLASH_BOOT)"
BOOT_MODE_DOWNLOAD = b"boot:0x5 (DOWNLOAD(USB/UART/SDIO_REI_FEO))"


@dataclass(frozen=True)
class BootDecision:
    """The outcome of checking the flash at reset."""

    image: ImageInfo | None
    problem: str = ""  # why the image does not boot (printed in the boot loop)
    banner: str = DEFAULT_BANNER


def rom_banner(cause: str, download: bool) -> bytes:
    """The first lines the ROM prints after a reset."""
    reset = RESET_CAUSES[cause]
    mode = BOOT_MODE_DOWNLOAD if download else BOOT_MODE_FLASH
    text = ROM_VERSION + f"rst:0x{reset.code:x} ({reset.name}),".encode() + mode + b"\r\n"
    if cause != "poweron":
        text += SAVED_PC
    return text + (b"waiting for download\r\n" if download else b"")


def check_flash_image(flash_bytes: bytes, chip_revision: int = 1) -> BootDecision:
    """Decide whether the image at flash offset 0x0 boots on a chip of `chip_revision` (v0.1: 1), as the ROM does."""
    try:
        image = parse_image(flash_bytes, chip_id=ESP32C6_CHIP_ID, chip_revision=chip_revision)
    except ImageError as exc:
        return BootDecision(None, str(exc))
    return BootDecision(image, banner=firmware_banner(image))


def firmware_banner(image: ImageInfo) -> str:
    """The banner a virtual firmware image asks for, or the default one."""
    for _, data in image.segments:
        start = data.find(FIRMWARE_MARKER)
        if start >= 0:
            text = data[start + len(FIRMWARE_MARKER) :].split(b"\0", 1)[0]
            return text.decode("utf-8", "replace") or DEFAULT_BANNER
    return DEFAULT_BANNER


def boot_loop_text(problem: str, first_word: int) -> bytes:
    """One round of the ROM's invalid-image boot loop."""
    detail = f"invalid header: 0x{first_word:08x}" if "invalid header" in problem else f"image rejected: {problem}"
    return ROM_VERSION + b"rst:0x7 (TG0_WDT_HPSYS)," + BOOT_MODE_FLASH + b"\r\n" + SAVED_PC + detail.encode() + b"\r\n"


def loader_text(image: ImageInfo) -> bytes:
    """The second-stage lines printed while a valid image loads."""
    lines = [b"SPIWP:0xee", b"mode:DIO, clock div:2"]
    lines += [f"load:0x{addr:08x},len:0x{len(data):x}".encode() for addr, data in image.segments]
    lines.append(f"entry 0x{image.entry:08x}".encode())
    return b"\r\n".join(lines) + b"\r\n"


def watchdog_text() -> bytes:
    """What ESP-IDF's panic handler prints when MicroPython's task watchdog (machine.WDT) is not fed."""
    return (
        b"E (0) task_wdt: Task watchdog got triggered. "
        b"The following tasks/users did not reset the watchdog in time:\r\n"
        b"E (0) task_wdt:  - mp_task (CPU 0)\r\n"
        b"E (0) task_wdt: Aborting.\r\n"
        b"\r\nabort() was called at PC 0x42017a3e on core 0\r\n"
        b"\r\nRebooting...\r\n"
    )

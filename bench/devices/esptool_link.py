"""Flash an ESP image through the real esptool library over one serial connection.

One connection does it all: reset into the ROM loader (DTR/RTS), upload the stub, raise the baud,
compare the region's MD5 (skip when it already matches), write compressed blocks, verify the MD5 and
hard-reset into the new firmware. Blocking: run it in a thread. esptool's log output goes to the
calling thread's log file (many boards flash at once, each in its own thread).
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import serial
import serial.rfc2217
from esptool.cmds import detect_chip
from esptool.loader import ESPLoader
from esptool.logger import TemplateLogger, log

_context = threading.local()
_install_lock = threading.Lock()
_installed = False


class _ThreadLogger(TemplateLogger):
    """Sends esptool's messages to the log file of the thread that is flashing (or drops them)."""

    def _out(self, text: str) -> None:
        stream: IO[str] | None = getattr(_context, "log", None)
        if stream is not None:
            stream.write(text + "\n")
            stream.flush()

    def print(self, *args, **kwargs) -> None:
        self._out(" ".join(str(a) for a in args))

    def note(self, message: str) -> None:
        self._out(f"NOTE: {message}")

    def warning(self, message: str) -> None:
        self._out(f"WARNING: {message}")

    def error(self, message: str) -> None:
        self._out(f"ERROR: {message}")

    def stage(self, finish: bool = False) -> None:
        """Stages are not shown."""

    def progress_bar(self, cur_iter: int, total_iters: int, prefix: str = "", suffix: str = "", bar_length: int = 30):
        """Progress is reported by `flash_image` itself."""

    def set_verbosity(self, verbosity: str) -> None:
        """One verbosity: everything to the log file."""


def _install_logger() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            log.set_logger(_ThreadLogger())
            _installed = True


class Rfc2217Port(serial.rfc2217.Serial):
    """pyserial's RFC 2217 client, renegotiating only what the server cares about.

    The stock client renegotiates baud, data bits, parity and stop bits, and waits at least 0.1 s for
    the server's acknowledgements, every time the *local* read timeout changes; esptool changes it on
    every command. Here a settings change is negotiated as before, a timeout change costs nothing."""

    _negotiated: tuple | None = None

    def _reconfigure_port(self) -> None:
        if self._write_timeout is not None:  # as the stock client: callers (esptool) fall back to None
            raise NotImplementedError("write_timeout is currently not supported")
        wanted = (self._baudrate, self._bytesize, self._parity, self._stopbits, self._rtscts, self._xonxoff)
        if wanted != self._negotiated:
            super()._reconfigure_port()
            self._negotiated = wanted

    def close(self) -> None:
        self._negotiated = None
        super().close()


def open_port(url: str) -> serial.SerialBase:
    """Open `url` for esptool (exclusively), RFC 2217 through `Rfc2217Port`."""
    if url.startswith("rfc2217://"):
        port = Rfc2217Port(None, exclusive=True)
        port.port = url
    else:
        port = serial.serial_for_url(url, exclusive=True, do_not_open=True)
    port.open()
    return port


@dataclass
class FlashOutcome:
    """What happened on the board."""

    written: bool  # False: the board already had the image (MD5 matched)
    chip: str
    mac: str
    bytes_sent: int = 0


ProgressFn = Callable[[int, int], None]


def flash_image(
    url: str,
    image: bytes,
    *,
    offset: int = 0,
    baud: int = 921600,
    log_file: IO[str] | None = None,
    progress: ProgressFn | None = None,
    connect_attempts: int = 3,
    expect_chip: str = "ESP32-C6",
    usb_serial_jtag: bool = False,
) -> FlashOutcome:
    """Write `image` at `offset` unless the board already holds it; verify; reset into it.

    A port without modem lines (socket://) cannot pulse EN/IO9: the board must already be in download
    mode (see `mpremote_deploy.request_bootloader`), and it leaves the loader by a software reboot."""
    _install_logger()
    _context.log = log_file
    esp: ESPLoader | None = None
    modem_lines = has_modem_lines(url)
    try:
        connect_mode = ("usb-reset" if usb_serial_jtag else "default-reset") if modem_lines else "no-reset"
        port = open_port(url)
        try:
            esp = detect_chip(port, ESPLoader.ESP_ROM_BAUD, connect_mode, False, connect_attempts)
        except BaseException:
            port.close()
            raise
        chip = esp.CHIP_NAME
        if chip != expect_chip:
            raise WrongChip(f"the board is an {chip}, not an {expect_chip}")
        mac = ":".join(f"{b:02x}" for b in esp.read_mac())
        esp = esp.run_stub()
        if baud != ESPLoader.ESP_ROM_BAUD:
            esp.change_baud(baud)
        esp.flash_spi_attach(0)
        want = hashlib.md5(image).hexdigest()
        if esp.flash_md5sum(offset, len(image)) == want:
            _leave_loader(esp, modem_lines, usb_serial_jtag)
            return FlashOutcome(written=False, chip=chip, mac=mac)
        compressed = zlib.compress(image, 9)
        blocks = esp.flash_defl_begin(len(image), len(compressed), offset)
        size = esp.FLASH_WRITE_SIZE
        for seq in range(blocks):
            esp.flash_defl_block(compressed[seq * size : (seq + 1) * size], seq, timeout=10)
            if progress:
                progress(min((seq + 1) * size, len(compressed)), len(compressed))
        esp.flash_defl_finish(False)  # the stub acknowledges once the last block is in flash
        got = esp.flash_md5sum(offset, len(image))
        if got != want:
            raise VerifyError(f"verify failed: flash MD5 {got}, image MD5 {want}")
        _leave_loader(esp, modem_lines, usb_serial_jtag)
        return FlashOutcome(written=True, chip=chip, mac=mac, bytes_sent=len(compressed))
    finally:
        if esp is not None:
            esp._port.close()
        _context.log = None


@dataclass
class ChipIdentity:
    """What the ROM loader says about a board."""

    chip: str  # esptool's name, e.g. "ESP32-C6"
    mac: str
    flash_size: int | None  # bytes, from the flash chip's JEDEC ID (None when it reports no known size)
    flash_id: int


def identify_chip(
    url: str,
    *,
    reset: bool,
    usb_serial_jtag: bool = False,
    log_file: IO[str] | None = None,
    connect_attempts: int = 2,
) -> ChipIdentity:
    """Connect to the ROM loader on `url` (with esptool's DTR/RTS reset when `reset`, its USB-Serial-JTAG
    sequence on such a port; else the board must be in download mode already), read chip, MAC and flash size,
    then boot the firmware again. Blocking."""
    _install_logger()
    _context.log = log_file
    esp: ESPLoader | None = None
    try:
        port = open_port(url)
        try:
            mode = ("usb-reset" if usb_serial_jtag else "default-reset") if reset else "no-reset"
            esp = detect_chip(port, ESPLoader.ESP_ROM_BAUD, mode, False, connect_attempts)
        except BaseException:
            port.close()
            raise
        mac = ":".join(f"{b:02x}" for b in esp.read_mac())
        esp.flash_spi_attach(0)
        flash_id = esp.flash_id()
        size_id = (flash_id >> 16) & 0xFF
        flash_size = 1 << size_id if 0x12 <= size_id <= 0x1A else None  # 256 KB .. 64 MB
        _leave_loader(esp, reset, usb_serial_jtag)
        return ChipIdentity(esp.CHIP_NAME, mac, flash_size, flash_id)
    finally:
        if esp is not None:
            esp._port.close()
        _context.log = None


def has_modem_lines(url: str) -> bool:
    """False for links that carry no DTR/RTS (raw TCP): esptool cannot reset the chip through them."""
    return not url.startswith("socket://")


def _leave_loader(esp: ESPLoader, modem_lines: bool, usb_serial_jtag: bool) -> None:
    """Boot the firmware: RTS pulse on EN, or (no modem lines) the loader's own reboot (FLASH_END, reboot)."""
    if modem_lines:
        esp.hard_reset(usb_serial_jtag)
    else:
        esp.flash_begin(0, 0)
        esp.flash_finish(reboot=True)


class VerifyError(Exception):
    """The flash did not read back as written."""


class WrongChip(Exception):
    """The port leads to another chip than the image is for."""

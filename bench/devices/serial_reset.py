"""Hard reset of a serial ESP board over DTR/RTS, with esptool's own reset sequences.

A board with a USB-UART bridge (CP210x, CH34x, FTDI) and the classic two-transistor circuit pulses EN
through RTS; a chip on its own USB-Serial-JTAG (Espressif 303a:1001) takes esptool's USB sequence
(longer hold, the port re-enumerates). Over RFC 2217 the line changes reach the board as on a local port.
A link without modem lines (socket://) or a pty cannot do it: `can_hard_reset` says so beforehand.
"""

from __future__ import annotations

import contextlib
import time

import serial
from esptool.reset import HardReset
from serial.tools import list_ports

from bench.devices.esptool_link import Rfc2217Port, has_modem_lines

USB_JTAG_VID_PID = (0x303A, 0x1001)
SETTLE_S = 0.1


def can_hard_reset(url: str) -> bool:
    """True when `url` carries DTR/RTS (a local serial device or RFC 2217)."""
    return has_modem_lines(url) and not url.startswith("loop://")


def is_usb_jtag(url: str) -> bool:
    """True when `url` is a local port of an Espressif USB-Serial-JTAG (esptool's USB reset timing)."""
    return any(info.device == url and (info.vid, info.pid) == USB_JTAG_VID_PID for info in list_ports.comports())


def _open_idle(url: str) -> serial.SerialBase:
    """Open `url` with DTR and RTS released (pyserial asserts both on open by default; the classic circuit
    only pulls EN low while RTS is asserted and DTR is not, and IO9 stays high for a normal boot)."""
    if url.startswith("rfc2217://"):
        port: serial.SerialBase = Rfc2217Port(None, exclusive=True)
        port.port = url
    else:
        port = serial.serial_for_url(url, exclusive=True, do_not_open=True)
    port.dtr = False
    port.rts = False
    port.open()
    return port


def hard_reset(url: str, *, usb_jtag: bool | None = None) -> None:
    """Pulse EN over RTS (esptool's HardReset; its USB-Serial-JTAG timing when `usb_jtag`, or when None and the
    local port is an Espressif 303a:1001). Blocking."""
    uses_usb = is_usb_jtag(url) if usb_jtag is None else usb_jtag
    port = _open_idle(url)
    try:
        HardReset(port, uses_usb=uses_usb)()
        time.sleep(SETTLE_S)
    finally:
        with contextlib.suppress(OSError, serial.SerialException):
            port.close()

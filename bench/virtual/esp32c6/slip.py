"""SLIP framing as the ESP ROM uses it: 0xC0 delimits, 0xDB escapes (0xC0 -> DB DC, 0xDB -> DB DD)."""

from __future__ import annotations

END = 0xC0
ESC = 0xDB
ESC_END = 0xDC
ESC_ESC = 0xDD


def slip_encode(payload: bytes) -> bytes:
    """One SLIP frame carrying `payload`."""
    body = payload.replace(b"\xdb", b"\xdb\xdd").replace(b"\xc0", b"\xdb\xdc")
    return b"\xc0" + body + b"\xc0"


class SlipDecoder:
    """Turns a byte stream into frames; bytes outside frames are dropped (as the ROM does)."""

    def __init__(self) -> None:
        self._frame: bytearray | None = None
        self._escaped = False

    def reset(self) -> None:
        """Forget a partial frame (after a reset or mode change)."""
        self._frame = None
        self._escaped = False

    def feed(self, data: bytes) -> list[bytes]:
        """Consume `data`; return every frame it completed."""
        frames: list[bytes] = []
        for byte in data:
            if self._frame is None:
                if byte == END:
                    self._frame = bytearray()
                continue
            if self._escaped:
                self._escaped = False
                self._frame.append(END if byte == ESC_END else ESC if byte == ESC_ESC else byte)
            elif byte == ESC:
                self._escaped = True
            elif byte == END:
                if self._frame:
                    frames.append(bytes(self._frame))
                    self._frame = None
                # an empty frame is a back-to-back delimiter: keep the frame open
            else:
                self._frame.append(byte)
        return frames

# The board's `sys` and `micropython` (MicroPython code), as the chip's UART console has them.
# Text (print, sys.stdout.write) is cooked by the board (\n -> \r\n); sys.stdout.buffer is raw, as on the
# chip: its bytes reach the board framed (RAW_FRAME, a 2-byte length, the bytes) on the same pipe as the
# text, so the board passes them on untouched and in order (bench.virtual.esp32c6.vm). mpremote's `mount`
# speaks a binary protocol through it. micropython.kbd_intr tells the board which byte interrupts a program
# (-1: none), as it tells the chip's UART driver: the files `mount` sends may hold 0x03 bytes.
import sys as _sys

import board_machine

import micropython as _micropython

RAW_FRAME = b"\x10R"
_MAX = 65535


class _RawOut:
    def __init__(self, out):
        self._out = out

    def write(self, data, n=-1):
        view = memoryview(data) if n < 0 else memoryview(data)[:n]
        for at in range(0, len(view), _MAX):
            part = bytes(view[at : at + _MAX])
            self._out.write(RAW_FRAME + len(part).to_bytes(2, "little") + part)
        return len(view)

    def flush(self):
        pass


class _Stdout:
    def __init__(self, text):
        self._text = text
        self.buffer = _RawOut(text.buffer)

    def write(self, text):
        return self._text.write(text)

    def flush(self):
        pass


def _kbd_intr(char):
    _micropython.kbd_intr(char)
    board_machine._send(b"kbd_intr " + str(int(char)).encode())


def _like(module, name, **replaced):
    """A stand-in module: every public name of `module`, some replaced."""

    class Stand:
        pass

    for key in dir(module):
        if not key.startswith("__"):
            setattr(Stand, key, replaced.get(key, getattr(module, key)))
    Stand.__name__ = name
    return Stand


def install():
    """Put the board's sys and micropython in sys.modules."""
    out = _Stdout(_sys.stdout)
    _sys.modules["sys"] = _like(_sys, "sys", stdout=out, stderr=out)
    _sys.modules["micropython"] = _like(_micropython, "micropython", kbd_intr=_kbd_intr)

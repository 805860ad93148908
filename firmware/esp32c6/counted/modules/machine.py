# machine, as MicroPython's esp32 port documents it for the ESP32-C6. Resets, sleeps, the timers and the
# watchdog are the chip's (_c6machine, C); Pin is C too (_c6gpio: an output's level changes are events on the
# counted clock, which the board's PPK2 sees on its logic inputs); nothing is wired to UART1, so it is modelled.
import time

import _c6machine
from _c6gpio import Pin
from _c6machine import _deepsleep, _rtc, _timer, _wdt

reset = _c6machine.reset
soft_reset = _c6machine.soft_reset
bootloader = _c6machine.bootloader
unique_id = _c6machine.unique_id
reset_cause = _c6machine.reset_cause
freq = _c6machine.freq
idle = _c6machine.idle

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5
SLEEP = 2
DEEPSLEEP = 4
PIN_WAKE = EXT0_WAKE = 2
EXT1_WAKE = 3
TIMER_WAKE = 4
TOUCHPAD_WAKE = 5
ULP_WAKE = 6
_wake = [0]


def deepsleep(time_ms=0):
    _deepsleep(int(time_ms))


def lightsleep(time_ms=None):
    if time_ms is None:
        while True:
            idle()
    time.sleep_ms(int(time_ms))
    _wake[0] = TIMER_WAKE


sleep = lightsleep


def wake_reason():
    return _wake[0]


def disable_irq():
    return 0


def enable_irq(state=0):
    pass


class Signal:
    def __init__(self, pin, *args, invert=False, **kwargs):
        self._pin = pin if isinstance(pin, Pin) else Pin(pin, *args, **kwargs)
        self._invert = bool(invert)

    def __call__(self, x=None):
        return self.value(x)

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)

    def value(self, x=None):
        if x is None:
            return self._pin.value() ^ self._invert
        self._pin.value(int(bool(x)) ^ self._invert)


def time_pulse_us(pin, pulse_level, timeout_us=1000000):
    time.sleep_us(int(timeout_us))
    return -1 if pin.value() == pulse_level else -2


class UART:
    INV_TX = 1
    INV_RX = 2
    INV_RTS = 4
    INV_CTS = 8
    RTS = 1
    CTS = 2

    def __init__(self, id, baudrate=115200, bits=8, parity=None, stop=1, **kwargs):
        if id not in (0, 1):
            raise ValueError(f"UART({id}) does not exist")
        self._id = id
        self.init(baudrate, bits, parity, stop, **kwargs)

    def init(self, baudrate=115200, bits=8, parity=None, stop=1, *, tx=None, rx=None, timeout=0, **kwargs):
        if bits not in (5, 6, 7, 8):
            raise ValueError("invalid data bits")
        if parity not in (None, 0, 1):
            raise ValueError("invalid parity")
        if stop not in (1, 1.5, 2):
            raise ValueError("invalid stop bits")
        if not 0 < baudrate <= 5000000:
            raise ValueError("invalid baudrate")
        self._baud = baudrate
        self._bits = 1 + bits + (0 if parity is None else 1) + stop
        self._timeout = timeout

    def deinit(self):
        pass

    def any(self):
        return 0

    def read(self, nbytes=None):
        time.sleep_ms(self._timeout)
        return None

    def readline(self):
        return self.read()

    def readinto(self, buf, nbytes=None):
        return self.read()

    def write(self, buf):
        n = len(buf)
        time.sleep_us(n * self._bits * 1000000 // self._baud)  # the wire time at the set baud rate
        return n

    def flush(self):
        pass

    def txdone(self):
        return True

    def __repr__(self):
        return f"UART({self._id}, baudrate={self._baud})"


class Timer:
    ONE_SHOT = 0
    PERIODIC = 1

    def __init__(self, id, **kwargs):
        if not isinstance(id, int) or id < 0 or id > 1:
            raise ValueError("invalid Timer number")
        self._id = id
        if kwargs:
            self.init(**kwargs)

    def init(self, *, mode=PERIODIC, period=-1, freq=-1, callback=None, tick_hz=1000, hard=False):
        if mode not in (Timer.ONE_SHOT, Timer.PERIODIC):
            raise ValueError("invalid mode")
        if freq > 0:
            period_us = 1000000 // freq
        elif period >= 0:
            period_us = period * 1000000 // tick_hz
        else:
            period_us = 0
        _timer(self._id, period_us, mode == Timer.PERIODIC, callback, self)

    def deinit(self):
        _timer(self._id, -1, False, None, None)

    def __repr__(self):
        return f"Timer({self._id})"


class WDT:
    def __init__(self, id=0, timeout=5000):
        if id != 0:
            raise ValueError
        if timeout <= 0:
            raise ValueError("WDT timeout too short")
        _wdt(timeout)

    def feed(self):
        _wdt(0)


class RTC:
    def __init__(self, id=0):
        pass

    def datetime(self, dt=None):
        if dt is None:
            ns = _rtc()
            t = time.gmtime(ns // 1000000000)
            return (t[0], t[1], t[2], t[6], t[3], t[4], t[5], ns // 1000 % 1000000)
        y, mo, d, _, h, mi, s = dt[:7]
        us = dt[7] if len(dt) > 7 else 0
        _rtc(time.mktime((y, mo, d, h, mi, s, 0, 0)), us)

    def init(self, dt):
        self.datetime(dt)

    def memory(self, data=None):
        if data is None:
            return bytes(_rtc_mem)
        _rtc_mem[:] = bytearray(data)


_rtc_mem = bytearray()

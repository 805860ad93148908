# The `machine` module of the virtual ESP32-C6 (MicroPython code), the surface of MicroPython's esp32 port
# for this chip: reset/bootloader/unique_id/reset_cause/freq/idle, Pin, UART, Timer and WDT. Board-level
# requests (reset, bootloader, soft reset, watchdog) go to the board over the control pipe; the board acts.
# What the counted firmware's machine has too (UART, Signal, the constants, the argument checks) is its frozen
# _machinebase, which this VM imports from the firmware's folder. Peripherals that are not modelled are absent
# (AttributeError), as on a port built without them; docs/esp32c6.md lists each name of the esp32 port's machine
# that is missing here, and why.
import _thread
import time

import _machinebase
from _machinebase import *  # noqa: F403 (the names both boards' machines share)

import micropython

__name__ = "machine"
del __file__  # built in on the chip: no host path in its repr

_state = {"mac": b"\0" * 6, "ctl": None, "cause": _machinebase.PWRON_RESET, "freq": 160000000}
_FREQS_MHZ = (20, 40, 80, 160)  # what esp_pm accepts on the C6 (XTAL 40 MHz; PLL 80/160 MHz)


def setup(mac, ctl, cause):
    _state["mac"] = mac
    _state["ctl"] = ctl
    _state["cause"] = cause


def _send(line):
    _state["ctl"].write(line + b"\n")  # unbuffered: one write() on the pipe


def _request(what):
    _send(what)
    while True:  # the board stops this VM; nothing runs after a reset request
        time.sleep(1)


def reset():
    _request(b"reset")


def soft_reset():
    _request(b"soft_reset")


def bootloader():
    _request(b"bootloader")


def unique_id():
    return _state["mac"]


def reset_cause():
    return _state["cause"]


def freq(hz=None):
    if hz is None:
        return _state["freq"]
    mhz = int(hz) // 1000000
    if mhz not in _FREQS_MHZ:
        raise ValueError("frequency must be 20MHz, 40MHz, 80Mhz or 160MHz")
    _state["freq"] = mhz * 1000000


def idle():
    time.sleep_ms(1)


# -- GPIO -------------------------------------------------------------------------------------------------

_GPIO_COUNT = 31  # GPIO0..30
_FLASH_PINS = (24, 25, 26, 27, 28, 29, 30)  # wired to the SPI flash on modules: not offered by the port
_levels = {}  # pin id -> level driven by the pin itself (output) or its pull (input)


class Pin(_machinebase._Level):
    IN = 1
    OUT = 3
    OPEN_DRAIN = 7
    PULL_UP = 2
    PULL_DOWN = 1
    IRQ_RISING = 1
    IRQ_FALLING = 2
    DRIVE_0 = 0
    DRIVE_1 = 1
    DRIVE_2 = 2
    DRIVE_3 = 3

    def __init__(self, id, mode=-1, pull=-1, *, value=None, drive=None, hold=None):
        if not isinstance(id, int) or id < 0 or id >= _GPIO_COUNT or id in _FLASH_PINS:
            raise ValueError("invalid pin")
        self._id = id
        self._mode = None
        self._pull = None
        self.init(mode, pull, value=value, drive=drive, hold=hold)

    def init(self, mode=-1, pull=-1, *, value=None, drive=None, hold=None):
        if mode != -1:
            if mode not in (None, Pin.IN, Pin.OUT, Pin.OPEN_DRAIN):
                raise ValueError("invalid pin mode")
            self._mode = mode
        if pull != -1:
            if pull not in (None, Pin.PULL_UP, Pin.PULL_DOWN):
                raise ValueError("invalid pull")
            self._pull = pull
        if drive is not None and drive not in (0, 1, 2, 3):
            raise ValueError("bad drive strength")
        if value is not None:
            _levels[self._id] = 1 if value else 0
        return None

    def value(self, x=None):
        if x is None:
            if self._mode in (Pin.OUT, Pin.OPEN_DRAIN):
                level = _levels.get(self._id, 0)
                # open drain releasing the line: only a pull raises it (nothing else is wired)
                if self._mode == Pin.OPEN_DRAIN and level == 1:
                    return 1 if self._pull == Pin.PULL_UP else 0
                return level
            # an input: nothing drives the pin on this board, so it reads its pull (floating reads 0)
            return 1 if self._pull == Pin.PULL_UP else 0
        _levels[self._id] = 1 if x else 0
        return None

    def irq(self, handler=None, trigger=3, *, wake=None, hard=False):
        # nothing on this board changes an input's level, so the handler is registered and never runs
        self._irq = (handler, trigger)
        return None

    def __repr__(self):
        return f"Pin({self._id})"


# -- Timer (a thread per armed timer) and the watchdog (the board resets the chip when it is not fed) --------


class Timer(_machinebase.Timer):
    _gen = 0  # which arming of the timer a thread serves; the thread of an older one ends

    def _arm(self, period_us, periodic, callback):
        self._gen += 1
        if period_us >= 0:
            _thread.start_new_thread(self._run, (self._gen, periodic, max(period_us, 1), callback))

    def _run(self, gen, periodic, period_us, callback):
        due = time.ticks_add(time.ticks_us(), period_us)
        while gen == self._gen:
            wait = time.ticks_diff(due, time.ticks_us())
            if wait > 0:
                time.sleep_us(min(wait, 20000))
                continue
            if callback is not None:
                try:  # noqa: SIM105 (no contextlib in MicroPython)
                    micropython.schedule(callback, self)
                except RuntimeError:  # schedule queue full: this tick is lost, as on the chip
                    pass
            if not periodic:
                return
            due = time.ticks_add(due, period_us)


class WDT(_machinebase.WDT):
    def _kick(self, timeout_ms):
        _send(b"wdt %d" % timeout_ms if timeout_ms else b"feed")


sleep = _machinebase.lightsleep

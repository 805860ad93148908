# What `machine` is on both virtual ESP32-C6 boards (MicroPython code): the counted firmware freezes this module
# beside its machine.py, and the unix-port VM's board machine imports it from this folder. Here are the names of
# MicroPython's esp32 port that behave the same whatever runs them: the reset and wake constants, UART (nothing is
# wired to it), Signal, time_pulse_us, lightsleep, and the argument checks of Timer and WDT. Each board's machine
# gives Pin, the resets and the clock, and subclasses Timer (`_arm`) and WDT (`_kick`) with its own backend.
import time

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

SLEEP = 2  # MACHINE_WAKE_SLEEP
DEEPSLEEP = 4  # MACHINE_WAKE_DEEPSLEEP
PIN_WAKE = EXT0_WAKE = 2  # esp_sleep_source_t
EXT1_WAKE = 3
TIMER_WAKE = 4
TOUCHPAD_WAKE = 5
ULP_WAKE = 6
_wake = [0]  # esp_sleep_get_wakeup_cause() of the last light sleep (0: none since reset)


def _pin_class():
    from machine import Pin  # the board's, which imports this module first

    return Pin


class _Level:
    """What Pin and Signal share: `p()` / `p(x)` and on()/off() are value() / value(x)."""

    def __call__(self, x=None):
        return self.value(x)

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)


class Signal(_Level):
    """A Pin seen through an active level: Signal(pin, invert=False) or Signal(id, mode, ..., invert=False)."""

    def __init__(self, pin, *args, invert=False, **kwargs):
        pin_class = _pin_class()
        self._pin = pin if isinstance(pin, pin_class) else pin_class(pin, *args, **kwargs)
        self._invert = bool(invert)

    def value(self, x=None):
        if x is None:
            return self._pin.value() ^ self._invert
        self._pin.value(int(bool(x)) ^ self._invert)


def time_pulse_us(pin, pulse_level, timeout_us=1000000):
    """Nothing drives a pin of these boards, so a pulse never starts (-2) or never ends (-1), after the timeout."""
    time.sleep_us(int(timeout_us))
    return -1 if pin.value() == pulse_level else -2


def lightsleep(time_ms=None):
    """Sleep with the CPU stopped: until the timer wakes the chip (TIMER_WAKE); with no time, nothing on these
    boards (no wired pin, no UART input wake) can wake it."""
    if time_ms is None:
        while True:
            time.sleep(1)
    time.sleep_ms(int(time_ms))
    _wake[0] = TIMER_WAKE


def wake_reason():
    return _wake[0]


class UART:
    """UART0 or UART1 (the LP UART is not a machine.UART), with nothing wired to its pins: a write takes the wire
    time of its bytes at the set baud rate, a read waits for its timeout and returns None."""

    INV_TX = 1
    INV_RX = 2
    INV_RTS = 4
    INV_CTS = 8
    RTS = 1
    CTS = 2

    def __init__(self, id, baudrate=115200, bits=8, parity=None, stop=1, **kwargs):
        if not isinstance(id, int) or id < 0 or id > 1:
            raise ValueError(f"UART({id}) does not exist")
        self._id = id
        self.init(baudrate, bits, parity, stop, **kwargs)

    def init(self, baudrate=115200, bits=8, parity=None, stop=1, *, tx=None, rx=None, timeout=0, **kwargs):
        if bits not in (5, 6, 7, 8):
            raise ValueError("invalid data bits")
        if parity not in (None, 0, 1):
            raise ValueError("invalid parity")
        if stop not in (1, 2):
            raise ValueError("invalid stop bits")
        if not 0 < baudrate <= 5000000:
            raise ValueError("invalid baudrate")
        for pin in (tx, rx):
            if isinstance(pin, int):
                _pin_class()(pin)  # "invalid pin", as the port says for a pin it does not offer
        self._baud = baudrate
        self._bits = 1 + bits + (0 if parity is None else 1) + stop  # a start bit, the data, parity, stop bits
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
        time.sleep_us(n * self._bits * 1000000 // self._baud)
        return n

    def flush(self):
        pass

    def txdone(self):
        return True

    def __repr__(self):
        return f"UART({self._id}, baudrate={self._baud})"


class Timer:
    """A hardware timer (one per timer group on the C6); the board's subclass arms it (`_arm`)."""

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
        self._arm(period_us, mode == Timer.PERIODIC, callback)

    def deinit(self):
        self._arm(-1, False, None)

    def _arm(self, period_us, periodic, callback):
        """Call `callback(self)` every `period_us` (once unless `periodic`); a negative period stops the timer."""
        raise NotImplementedError

    def __repr__(self):
        return f"Timer({self._id})"


class WDT:
    """The task watchdog: the board resets the chip when it is not fed within the timeout (`_kick`)."""

    def __init__(self, id=0, timeout=5000):
        if id != 0:
            raise ValueError
        if timeout <= 0:
            raise ValueError("WDT timeout too short")
        self._kick(timeout)

    def feed(self):
        self._kick(0)

    def _kick(self, timeout_ms):
        """Start the watchdog with `timeout_ms`, or feed it (0)."""
        raise NotImplementedError

# The `machine` module of the virtual ESP32-C6 (MicroPython code), the surface of MicroPython's esp32 port
# for this chip: reset/bootloader/unique_id/reset_cause/freq/idle, Pin, UART, Timer and WDT. Board-level
# requests (reset, bootloader, soft reset, watchdog) go to the board over the control pipe; the board acts.
# Peripherals that are not modelled are absent (AttributeError), as on a port built without them; docs/esp32c6.md
# lists each name of the esp32 port's machine that is missing here, and why.
import _thread
import time

import micropython

__name__ = "machine"
del __file__  # built in on the chip: no host path in its repr

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

_state = {"mac": b"\0" * 6, "ctl": None, "cause": PWRON_RESET, "freq": 160000000}
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


class _Level:
    """What Pin and Signal share: `p()` / `p(x)` and on()/off() are value() / value(x)."""

    def __call__(self, x=None):
        return self.value(x)

    def on(self):
        self.value(1)

    def off(self):
        self.value(0)


class Pin(_Level):
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


# -- UART -------------------------------------------------------------------------------------------------

_UART_COUNT = 2  # UART0, UART1 (the LP UART is not a machine.UART)


class UART:
    INV_TX = 1
    INV_RX = 2
    INV_RTS = 4
    INV_CTS = 8
    RTS = 1
    CTS = 2

    def __init__(self, id, baudrate=115200, bits=8, parity=None, stop=1, **kwargs):
        if not isinstance(id, int) or id < 0 or id >= _UART_COUNT:
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
                Pin(pin)
        self._baud = baudrate
        self._timeout = timeout

    def deinit(self):
        pass

    def any(self):
        return 0  # nothing is wired to this UART's RX pin

    def read(self, nbytes=None):
        time.sleep_ms(self._timeout)
        return None

    def readline(self):
        return self.read()

    def readinto(self, buf, nbytes=None):
        return self.read()

    def write(self, buf):
        # the bytes leave on the TX pin at the set baud rate; nothing is connected to it
        time.sleep_us(len(buf) * 10 * 1000000 // self._baud)
        return len(buf)

    def flush(self):
        pass

    def txdone(self):
        return True

    def __repr__(self):
        return f"UART({self._id}, baudrate={self._baud})"


# -- Timer (hardware timers: one per timer group on the C6) -------------------------------------------------

_TIMER_COUNT = 2


class Timer:
    ONE_SHOT = 0
    PERIODIC = 1

    def __init__(self, id, **kwargs):
        if not isinstance(id, int) or id < 0 or id >= _TIMER_COUNT:
            raise ValueError("invalid Timer number")
        self._id = id
        self._gen = 0
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
        self.deinit()
        self._gen += 1
        _thread.start_new_thread(self._run, (self._gen, mode, max(period_us, 1), callback))

    def _run(self, gen, mode, period_us, callback):
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
            if mode == Timer.ONE_SHOT:
                return
            due = time.ticks_add(due, period_us)

    def deinit(self):
        self._gen += 1

    def __repr__(self):
        return f"Timer({self._id})"


# -- Watchdog (the task watchdog; the board resets the chip when it is not fed) -----------------------------


class WDT:
    def __init__(self, id=0, timeout=5000):
        if id != 0:
            raise ValueError
        if timeout <= 0:
            raise ValueError("WDT timeout too short")
        _send(b"wdt %d" % timeout)

    def feed(self):
        _send(b"feed")


# -- Signal, pulses, light sleep (extmod/machine_signal.c, machine_pulse.c; ports/esp32/modmachine.c) ------

SLEEP = 2  # MACHINE_WAKE_SLEEP
DEEPSLEEP = 4  # MACHINE_WAKE_DEEPSLEEP
PIN_WAKE = EXT0_WAKE = 2  # esp_sleep_source_t
EXT1_WAKE = 3
TIMER_WAKE = 4
TOUCHPAD_WAKE = 5
ULP_WAKE = 6
_wake = [0]  # esp_sleep_get_wakeup_cause() of the last light sleep (0: none since reset)


class Signal(_Level):
    """A Pin seen through an active level: Signal(pin, invert=False) or Signal(id, mode, ..., invert=False)."""

    def __init__(self, pin, *args, invert=False, **kwargs):
        self._pin = pin if isinstance(pin, Pin) else Pin(pin, *args, **kwargs)
        self._invert = bool(invert)

    def value(self, x=None):
        if x is None:
            return self._pin.value() ^ self._invert
        self._pin.value(int(bool(x)) ^ self._invert)


def time_pulse_us(pin, pulse_level, timeout_us=1000000):
    """Nothing drives a pin of this board, so a pulse never starts (-2) or never ends (-1), after the timeout."""
    time.sleep_us(int(timeout_us))
    return -1 if pin.value() == pulse_level else -2


def lightsleep(time_ms=None):
    """Sleep with the CPU stopped: until the timer wakes the chip (TIMER_WAKE); with no time, nothing on this
    board (no wired pin, no UART input wake) can wake it."""
    if time_ms is None:
        while True:
            time.sleep(1)
    time.sleep_ms(int(time_ms))
    _wake[0] = TIMER_WAKE


sleep = lightsleep


def wake_reason():
    return _wake[0]

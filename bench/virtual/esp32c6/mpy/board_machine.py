# The `machine` module of the virtual ESP32-C6 (MicroPython code). Board-level requests (reset,
# bootloader, soft reset) go to the board over the control pipe; the board acts on them.
import time

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

_state = {"mac": b"\0" * 6, "ctl": None, "cause": PWRON_RESET}


def setup(mac, ctl, cause):
    _state["mac"] = mac
    _state["ctl"] = ctl
    _state["cause"] = cause


def _request(what):
    ctl = _state["ctl"]
    ctl.write(what + b"\n")
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
    return 160000000


def idle():
    time.sleep_ms(1)

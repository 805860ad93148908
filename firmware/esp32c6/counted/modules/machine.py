# machine, as MicroPython's esp32 port documents it for the ESP32-C6. Resets, sleeps, the timers and the
# watchdog are the chip's (_c6machine, C); Pin is C too (_c6gpio: an output's level changes are events on the
# counted clock, which the board's PPK2 sees on its logic inputs); what both virtual boards' machines share
# (UART, which nothing is wired to, Signal, the constants, the argument checks) is _machinebase.
import time

import _c6gpio
import _c6machine
import _machinebase
from _c6machine import _deepsleep, _rtc, _timer, _wdt
from _machinebase import *  # noqa: F403 (the names both boards' machines share)

reset = _c6machine.reset
soft_reset = _c6machine.soft_reset
bootloader = _c6machine.bootloader
unique_id = _c6machine.unique_id
reset_cause = _c6machine.reset_cause
freq = _c6machine.freq
idle = _c6machine.idle
Pin = _c6gpio.Pin
sleep = _machinebase.lightsleep


def deepsleep(time_ms=0):
    _deepsleep(int(time_ms))


def disable_irq():
    return 0


def enable_irq(state=0):
    pass


class Timer(_machinebase.Timer):
    def _arm(self, period_us, periodic, callback):
        _timer(self._id, period_us, periodic, callback, self)


class WDT(_machinebase.WDT):
    def _kick(self, timeout_ms):
        _wdt(timeout_ms)


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

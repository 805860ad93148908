"""Waking the frame loop on time without a busy wait: a timerfd (a kernel high-resolution timer) on the device clock.

asyncio's own timers end in the selector's timeout, which epoll takes in whole milliseconds, rounded up: a sleep
ends up to 1 ms after it was asked to. A timerfd armed for an absolute CLOCK_MONOTONIC time (the clock of
`npc_models.now_us`) becomes readable when that time comes, to the microsecond, and the event loop's selector wakes
on it like on any input: the loop still reads inputs while it waits, and no core is kept busy. The thread's timer
slack (50 us by default, by which the kernel may defer any timer to batch wake-ups) is set to 1 us.

Linux only, through ctypes (`os.timerfd_create` arrives with Python 3.13; the agent supports 3.11 on).
"""

from __future__ import annotations

import asyncio
import ctypes
import os

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC
TFD_TIMER_ABSTIME = 1
PR_SET_TIMERSLACK = 29
TIMER_SLACK_NS = 1000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


class Waker:
    """One timerfd, registered with the running event loop at the first wait: `await wake_at(t_us)`."""

    def __init__(self) -> None:
        self.fd = _check(_libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create")
        self.loop = None
        self.waiter = None
        _libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)  # this (the event loop's) thread; best effort

    def _arm(self, t_us: int) -> None:
        spec = _Itimerspec()
        spec.it_value.tv_sec, rem_us = divmod(t_us, 1_000_000)
        spec.it_value.tv_nsec = rem_us * 1000 or 1  # an all-zero it_value would disarm it
        _check(_libc.timerfd_settime(self.fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None), "timerfd_settime")

    def _fired(self) -> None:
        try:
            os.read(self.fd, 8)  # the expiry count; readable again only after the next expiry
        except BlockingIOError:
            return
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wake_at(self, t_us: int) -> None:
        """Return once the device clock (CLOCK_MONOTONIC, us) has reached `t_us`; the loop runs meanwhile."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            if self.loop is not None:
                self.loop.remove_reader(self.fd)
            loop.add_reader(self.fd, self._fired)
            self.loop = loop
        self.waiter = loop.create_future()
        self._arm(t_us)
        try:
            await self.waiter
        finally:
            self.waiter = None

    def close(self) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        os.close(self.fd)

"""The device clock for the MicroPython agent: `time.ticks_us` unwrapped into microseconds that never wrap.

`ticks_us` wraps (every 2^30 us on most ports); `Clock.now()` adds `ticks_diff` of successive reads,
so it stays exact as long as it is read at least once per half wrap period (~9 minutes): the agent's
loop reads it at least every second.
"""

try:
    from time import ticks_diff, ticks_us
except ImportError:  # CPython, for tests of the pure logic
    from time import monotonic_ns

    def ticks_us():
        return monotonic_ns() // 1000

    def ticks_diff(a, b):
        return a - b


class Clock:
    """Monotonic microseconds from an arbitrary origin (the first ticks_us reading)."""

    def __init__(self):
        self._last = ticks_us()
        self._now = self._last

    def now(self):
        """Microseconds now; never decreases, never wraps."""
        raw = ticks_us()
        self._now += ticks_diff(raw, self._last)
        self._last = raw
        return self._now

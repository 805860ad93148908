"""micropython/npcclock.py: the unwrapped ticks_us clock never wraps and never goes back."""

import npcclock

PERIOD = 1 << 30  # MicroPython's ticks period on the ESP32 and unix ports


def test_clock_unwraps_ticks_us(monkeypatch):
    raw = [PERIOD - 300]
    monkeypatch.setattr(npcclock, "ticks_us", lambda: raw[0] % PERIOD)
    monkeypatch.setattr(npcclock, "ticks_diff", lambda a, b: ((a - b + PERIOD // 2) % PERIOD) - PERIOD // 2)
    clock = npcclock.Clock()
    start = clock.now()
    seen = []
    for step in (100, 150, 100, 400_000_000, 400_000_000, 400_000_000):  # crosses the wrap twice
        raw[0] += step
        seen.append(clock.now() - start)
    assert seen == [100, 250, 350, 400_000_350, 800_000_350, 1_200_000_350]

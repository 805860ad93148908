"""Clock offset/drift estimation from ping/pong samples."""

import random

import pytest

from bench.agent.clock import ClockSync


def exchanges(offset_ns, drift_ppm, n, span_ns, seed=1):
    rng = random.Random(seed)
    out = []
    for k in range(n):
        b0 = 10**12 + k * span_ns // n
        up, down = rng.randint(50_000, 2_000_000), rng.randint(50_000, 2_000_000)
        if k % 3 == 0:
            up = down = 60_000  # a quiet exchange
        at = b0 + up
        d = round((at + offset_ns + (at - 10**12) * drift_ppm / 1e6) / 1000)
        out.append((b0, at + down, d))
    return out


def test_offset_from_the_quietest_exchanges():
    sync = ClockSync()
    for b0, b1, d in exchanges(-5_000_000_000, 0, 30, 10**8):
        sync.add(b0, b1, d)
    assert sync.offset_ns == pytest.approx(-5e9, abs=150_000)
    assert sync.drift_ppm == 0.0  # span too short to trust a slope
    dev_us = 123_456_789
    assert sync.to_device_us(sync.to_bench_ns(dev_us)) == pytest.approx(dev_us, abs=1)


def test_drift_over_a_long_span():
    sync = ClockSync()
    for b0, b1, d in exchanges(1_000_000, 50, 60, 20 * 10**9):
        sync.add(b0, b1, d)
    assert sync.drift_ppm == pytest.approx(50, abs=10)
    bench = 10**12 + 15 * 10**9
    true_dev_ns = bench + 1_000_000 + 15 * 10**9 * 50 / 1e6
    assert sync.to_bench_ns(round(true_dev_ns / 1000)) == pytest.approx(bench, abs=200_000)
    assert sync.min_rtt_ns == 120_000
    best = sorted(b1 - b0 for b0, b1, _ in exchanges(1_000_000, 50, 60, 20 * 10**9))[:30]
    assert sync.uncertainty_ns == max(best) / 2

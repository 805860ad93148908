"""Background telemetry from virtual boards through real sshd: tegrastats on the Jetson, thermal zones,
cpufreq and vcgencmd on the Pi 5; sampling carries on across a dropped SSH connection."""

from __future__ import annotations

import asyncio

import pytest

from bench.telemetry.monitor import TelemetryMonitor
from tests.linux_support import virtual_board

pytestmark = pytest.mark.e2e


def test_jetson_tegrastats_samples() -> None:
    with virtual_board("jetson-orin-nx") as board:

        async def sample(driver):
            async with await driver.telemetry(interval_s=0.2) as monitor:
                await asyncio.sleep(1.5)
            return monitor.samples

        samples = board.drive(sample, timeout_s=60)
    assert len(samples) >= 3
    times = [s.t_ns for s in samples]
    assert times == sorted(times)
    values = samples[-1].values
    assert samples[-1].source == "tegrastats"
    assert values["cpus_online"] == 8 and 0 < values["cpu_mhz"] <= 1984
    assert 0 < values["mem_used_mb"] < values["mem_total_mb"]
    assert 30 < values["temp_c"] < 100 and "temp_tj_c" in values and values["power_vdd_in_mw"] > 0


def test_pi_samples_show_throttling_and_survive_a_drop() -> None:
    with virtual_board("pi5") as board:

        async def sample_across_a_drop(driver):
            async def until(count: int) -> None:  # samples come every 0.2 s, later on a busy host
                for _ in range(300):
                    if len(monitor.samples) >= count:
                        return
                    await asyncio.sleep(0.1)

            async with await driver.telemetry(interval_s=0.2) as monitor:
                await until(2)
                before_drop = len(monitor.samples)
                board.virtual.set_throttled(0x50005)
                board.virtual.drop_connections()
                await until(before_drop + 4)
                await asyncio.sleep(0.5)  # a fault recorded after the last sample is seen too
            return before_drop, monitor.samples, [f.kind for f in driver.faults]

        before_drop, samples, faults = board.drive(sample_across_a_drop, timeout_s=60)
    assert before_drop >= 2 and len(samples) > before_drop + 2
    first, last = samples[0].values, samples[-1].values
    assert first["throttled_bits"] == 0 and first["throttled_now"] == 0
    assert last["throttled_bits"] == 0x50005 and last["throttled_now"] == 1
    assert 30 < last["temp_c"] < 100 and 0 < last["cpu_mhz"] <= last["cpu_max_mhz"] == 2400
    assert last["mem_total_mb"] > 0
    assert faults[:2] == ["ssh-dropped", "ssh-reconnected"]


def test_missing_tegrastats_is_reported_not_retried_forever() -> None:
    """A Pi has no tegrastats: a monitor told to use it stops with an error that says what to set."""
    with virtual_board("pi5") as board:

        async def sample_tegrastats(driver):
            async with TelemetryMonitor(await driver.connection(), "tegrastats", 0.2) as monitor:
                await asyncio.sleep(1.0)
            return monitor

        monitor = board.drive(sample_tegrastats, timeout_s=60)
    assert monitor.samples == []
    assert len(monitor.errors) == 1 and "tegrastats not found" in monitor.errors[0] and "sysfs" in monitor.errors[0]

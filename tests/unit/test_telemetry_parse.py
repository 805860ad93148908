"""Parsing board telemetry text: tegrastats lines (Orin and older Jetsons) and the Pi sampler's blocks."""

from __future__ import annotations

import pytest

from bench.telemetry.monitor import Sample, summarize
from bench.telemetry.parse import parse_pi_block, parse_tegrastats, throttle_flags

ORIN = (
    "11-30-2026 18:58:01 RAM 2530/15389MB (lfb 3036x4MB) SWAP 0/7695MB (cached 0MB) "
    "CPU [2%@729,1%@729,0%@729,0%@729,40%@1984,off,off,off] EMC_FREQ 0%@2133 GR3D_FREQ 12%@[305,305] "
    "VIC_FREQ 729 APE 174 CV0@45.375C CPU@46.968C SOC2@45.156C GPU@45.093C tj@48.5C "
    "VDD_IN 5067mW/5067mW VDD_CPU_GPU_CV 774mW/774mW VDD_SOC 1453mW/1453mW"
)
NANO = (
    "RAM 1571/3956MB (lfb 1x2MB) SWAP 0/1978MB (cached 0MB) IRAM 0/252kB(lfb 252kB) "
    "CPU [2%@1190,off,off,off] EMC_FREQ 0%@1600 GR3D_FREQ 0%@76 APE 25 PLL@24C CPU@25.5C "
    "GPU@24C AO@32C thermal@24.75C POM_5V_IN 1953/1953 POM_5V_GPU 0/0 POM_5V_CPU 157/157"
)


def test_orin_line() -> None:
    v = parse_tegrastats(ORIN)
    assert v["mem_used_mb"] == 2530 and v["mem_total_mb"] == 15389 and v["swap_used_mb"] == 0
    assert v["cpus_online"] == 5 and v["cpu_mhz"] == 1984 and v["cpu_load_pct"] == pytest.approx(43 / 5)
    assert v["gpu_load_pct"] == 12
    assert v["temp_tj_c"] == 48.5 and v["temp_cpu_c"] == 46.968 and v["temp_c"] == 48.5
    assert v["power_vdd_in_mw"] == 5067 and v["power_vdd_soc_mw"] == 1453


def test_older_jetson_line() -> None:
    v = parse_tegrastats(NANO)
    assert v["cpus_online"] == 1 and v["cpu_mhz"] == 1190
    assert v["temp_c"] == 32 and v["power_pom_5v_in_mw"] == 1953


def test_console_noise_is_not_a_sample() -> None:
    assert parse_tegrastats("tegrastats: permission denied") == {}


def test_pi_block_with_throttling() -> None:
    block = [
        "zone cpu-thermal 61850",
        "freq /sys/devices/system/cpu/cpu0 1500000 2400000",
        "freq /sys/devices/system/cpu/cpu1 1800000 2400000",
        "MemTotal:        8245376 kB",
        "MemAvailable:    7421440 kB",
        "throttled=0x50005",
    ]
    v = parse_pi_block(block)
    assert v["temp_c"] == 61.85 and v["temp_cpu_thermal_c"] == 61.85
    assert v["cpu_mhz"] == 1800 and v["cpu_max_mhz"] == 2400
    assert v["mem_total_mb"] == pytest.approx(8245376 / 1024)
    assert v["mem_used_mb"] == pytest.approx((8245376 - 7421440) / 1024)
    assert v["throttled_bits"] == 0x50005 and v["throttled_now"] == 1
    assert throttle_flags(0x50005) == ["under-voltage", "throttled", "under-voltage-occurred", "throttling-occurred"]


def test_pi_block_without_vcgencmd_has_no_throttle_values() -> None:
    v = parse_pi_block(["zone cpu-thermal 50000", "MemTotal: 100 kB"])
    assert v == {"temp_c": 50.0, "temp_cpu_thermal_c": 50.0}


def test_summary_has_units_and_counts() -> None:
    s = summarize([Sample(1, "sysfs", {"temp_c": 50.0, "cpu_mhz": 1500}), Sample(2, "sysfs", {"temp_c": 54.0})])
    assert s["temp_c"] == {"min": 50.0, "mean": 52.0, "max": 54.0, "n": 2, "unit": "degC"}
    assert s["cpu_mhz"]["unit"] == "MHz" and s["cpu_mhz"]["n"] == 1

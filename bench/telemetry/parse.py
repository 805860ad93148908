"""Parsers for board telemetry text: NVIDIA `tegrastats` lines and the Pi sampler's blocks."""

from __future__ import annotations

import re

_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_SWAP = re.compile(r"\bSWAP (\d+)/(\d+)MB")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_CORE = re.compile(r"(\d+)%@(\d+)")
_TEMP = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C\b")
_RAIL = re.compile(r"\b(VDD_[A-Z0-9_]+|POM_5V_[A-Z]+|VIN_SYS_5V0) (\d+)(?:mW)?/(\d+)(?:mW)?")
_GPU = re.compile(r"\bGR3D_FREQ (\d+)%")
_THROTTLED = re.compile(r"throttled=(0x[0-9a-fA-F]+)")

# vcgencmd get_throttled bits (Raspberry Pi firmware): now (0-3) and since boot (16-19).
THROTTLE_BITS = {
    0: "under-voltage",
    1: "arm-frequency-capped",
    2: "throttled",
    3: "soft-temperature-limit",
    16: "under-voltage-occurred",
    17: "arm-frequency-capping-occurred",
    18: "throttling-occurred",
    19: "soft-temperature-limit-occurred",
}


def parse_tegrastats(line: str) -> dict[str, float]:
    """Values from one tegrastats line (Jetson Orin and older formats); {} when it is not one."""
    values: dict[str, float] = {}
    if m := _RAM.search(line):
        values["mem_used_mb"], values["mem_total_mb"] = float(m[1]), float(m[2])
    if m := _SWAP.search(line):
        values["swap_used_mb"] = float(m[1])
    if m := _CPU.search(line):
        cores = _CORE.findall(m[1])
        if cores:
            values["cpu_load_pct"] = sum(int(load) for load, _ in cores) / len(cores)
            values["cpu_mhz"] = float(max(int(mhz) for _, mhz in cores))
            values["cpus_online"] = float(len(cores))
    if m := _GPU.search(line):
        values["gpu_load_pct"] = float(m[1])
    temps = {name.lower(): float(c) for name, c in _TEMP.findall(line)}
    for name, celsius in temps.items():
        values[f"temp_{name}_c"] = celsius
    if temps:
        values["temp_c"] = max(temps.values())
    for rail, now, _avg in _RAIL.findall(line):
        values[f"power_{rail.lower()}_mw"] = float(now)
    return values


def parse_pi_block(lines: list[str]) -> dict[str, float]:
    """Values from one block of the Pi sampler (`zone TYPE MILLI_C`, `freq CPU CUR_KHZ MAX_KHZ`,
    /proc/meminfo lines, `throttled=0x...`)."""
    values: dict[str, float] = {}
    temps: list[float] = []
    freqs: list[tuple[int, int]] = []
    mem: dict[str, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "zone" and parts[2].lstrip("-").isdigit():
            celsius = int(parts[2]) / 1000.0
            temps.append(celsius)
            values[f"temp_{parts[1].lower().replace('-', '_')}_c"] = celsius
        elif len(parts) == 4 and parts[0] == "freq" and parts[2].isdigit():
            freqs.append((int(parts[2]), int(parts[3]) if parts[3].isdigit() else 0))
        elif len(parts) >= 2 and parts[0] in ("MemTotal:", "MemAvailable:") and parts[1].isdigit():
            mem[parts[0][:-1]] = int(parts[1])
        elif m := _THROTTLED.search(line):
            bits = int(m[1], 16)
            values["throttled_bits"] = float(bits)
            values["throttled_now"] = float(bool(bits & 0xF))
    if temps:
        values["temp_c"] = max(temps)
    if freqs:
        values["cpu_mhz"] = max(cur for cur, _ in freqs) / 1000.0
        values["cpu_max_mhz"] = max(top for _, top in freqs) / 1000.0
    if "MemTotal" in mem and "MemAvailable" in mem:
        values["mem_total_mb"] = mem["MemTotal"] / 1024.0
        values["mem_used_mb"] = (mem["MemTotal"] - mem["MemAvailable"]) / 1024.0
    return values


def throttle_flags(bits: int) -> list[str]:
    """Names of the set bits of a `vcgencmd get_throttled` value."""
    return [name for bit, name in THROTTLE_BITS.items() if bits & (1 << bit)]

"""The one table of device kinds and their defaults."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KindInfo:
    """What the bench knows about a device kind before it reads a fleet file."""

    name: str
    description: str
    link: str  # "serial", "ssh" or "qemu"
    defaults: dict[str, Any] = field(default_factory=dict)


COMMON_DEFAULTS: dict[str, Any] = {
    "fps_target": 60,
    "vsync_hz": 60,
    "decision_budget_ms": 50,
    "model_format": "tflite-int8",  # the file the device runs: fixtures/models/<model>.tflite
    "ota_timing": "lan",  # CoAP retransmission timing for updates: lan, rfc7252, loopback (bench/ota/timing.py)
    "ota_server_host": "127.0.0.1",  # where the device reaches the bench's update server (QEMU: the driver's)
    "stall_s": 5.0,  # no frame record for this long mid-run: the device stopped answering (recovery ladder)
}

# SSH-reached Linux boards: agent folder (under $HOME unless absolute), telemetry source and period.
LINUX_DEFAULTS: dict[str, Any] = {
    "agent_dir": "npc-hil-bench",
    "telemetry": "tegrastats",  # "tegrastats" (Jetson) or "sysfs" (thermal zones, cpufreq, vcgencmd)
    "telemetry_interval_ms": 500,
}

KINDS: dict[str, KindInfo] = {
    k.name: k
    for k in (
        KindInfo(
            "esp32c6",
            "ESP32-C6 board running MicroPython, on a serial port",
            "serial",
            {
                **COMMON_DEFAULTS,
                "fps_target": 20,
                "vsync_hz": 20,
                "baud": 921600,
                "flash_size": 8 * 1024 * 1024,
                "chip_id": 13,
                "model": "npc-policy-int8",
                "model_format": "npcm-int8",  # fixtures/models/<model>.npcm, converted from the .tflite
                "memory_limit_kb": 160,  # live MicroPython heap the agent may use (of ~300 KB free)
                "wire_speed": False,  # virtual board: pace flashing at the simulated baud rate
                "firmware": "",  # image flashed at 0x0 (path; "" = firmware/esp32c6/virtual-micropython.bin)
            },
        ),
        KindInfo(
            "jetson-orin-nx",
            "NVIDIA Jetson Orin NX over SSH",
            "ssh",
            {**COMMON_DEFAULTS, **LINUX_DEFAULTS, "model": "npc-policy-large-int8", "memory_limit_mb": 512},
        ),
        KindInfo(
            "pi5",
            "Raspberry Pi 5 over SSH",
            "ssh",
            {
                **COMMON_DEFAULTS,
                **LINUX_DEFAULTS,
                "fps_target": 30,
                "model": "npc-policy-int8",
                "memory_limit_mb": 256,
                "telemetry": "sysfs",
            },
        ),
        KindInfo(
            "switch-arm64",
            "Switch-style ARM64 console image (4x Cortex-A57, 4 GB) in QEMU",
            "qemu",
            {**COMMON_DEFAULTS, "fps_target": 30, "model": "npc-policy-int8", "memory_limit_mb": 256},
        ),
    )
}

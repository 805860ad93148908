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
                "wire_speed": False,  # virtual board: pace flashing at the simulated baud rate
            },
        ),
        KindInfo(
            "jetson-orin-nx",
            "NVIDIA Jetson Orin NX over SSH",
            "ssh",
            {**COMMON_DEFAULTS, "model": "npc-policy-large-int8", "memory_limit_mb": 512},
        ),
        KindInfo(
            "pi5",
            "Raspberry Pi 5 over SSH",
            "ssh",
            {**COMMON_DEFAULTS, "fps_target": 30, "model": "npc-policy-int8", "memory_limit_mb": 256},
        ),
        KindInfo(
            "switch-arm64",
            "Switch-style ARM64 console image (4x Cortex-A57, 4 GB) in QEMU",
            "qemu",
            {**COMMON_DEFAULTS, "fps_target": 30, "model": "npc-policy-int8", "memory_limit_mb": 256},
        ),
    )
}

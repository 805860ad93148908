"""Device drivers, one module per kind, looked up through one registry."""

from __future__ import annotations

import importlib

from bench.devices.base import Driver
from bench.fleet import Device

# kind -> "module:Class". A kind missing here has no driver yet; `fleet check` says so.
DRIVERS: dict[str, str] = {
    "esp32c6": "bench.devices.esp32c6:Esp32c6Driver",
    "jetson-orin-nx": "bench.devices.linux:LinuxDriver",
    "pi5": "bench.devices.linux:LinuxDriver",
    "switch-arm64": "bench.devices.qemu_arm64:QemuArm64Driver",
}


def has_driver(kind: str) -> bool:
    """True when the bench can flash and run agents on devices of `kind`."""
    return kind in DRIVERS


def driver_for(device: Device, **kwargs: object) -> Driver:
    """A driver instance for `device` (KeyError when its kind has no driver)."""
    module_name, _, cls_name = DRIVERS[device.kind].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(device, **kwargs)

"""Device drivers, one module per kind, looked up through the kind registry (bench/config/kinds.py)."""

from __future__ import annotations

from bench.config.fleet import Device
from bench.config.kinds import KINDS
from bench.devices.base import Driver


def has_driver(kind: str) -> bool:
    """True when the bench can flash and run agents on devices of `kind`."""
    return kind in KINDS and KINDS[kind].driver is not None


def driver_for(device: Device, **kwargs: object) -> Driver:
    """A driver instance for `device` (ConfigError when its kind has no driver)."""
    return device.kind_info.driver_class()(device, **kwargs)

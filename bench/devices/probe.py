"""Probes before a run: does a device answer on its link (serial URL opens, SSH port answers, QEMU image there,
browser on its DevTools endpoint), without talking to its agent. The kind's driver probes; a kind without one,
its link type."""

from __future__ import annotations

from bench.config.fleet import Device
from bench.devices import driver_for, has_driver
from bench.links.probe_result import ProbeResult

__all__ = ["ProbeResult", "probe_link"]


async def probe_link(device: Device, timeout_s: float = 3.0) -> ProbeResult:
    """Probe `device` through its link, without talking to its agent."""
    if device.link is None:
        return ProbeResult(False, "virtual device not started (no link)")
    try:
        if has_driver(device.kind):
            result = await driver_for(device).probe(timeout_s)
        else:
            result = await device.link.probe(device.kind, timeout_s)
    except TimeoutError:
        result = ProbeResult(False, f"no answer within {timeout_s:g} s")
    if not result.reachable and device.os is not None:  # blank or broken OS: `flash --os` writes its image
        return ProbeResult(True, f"{result.detail}; its OS image will be written (flash --os)")
    return result

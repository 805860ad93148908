"""Link-level probes: does a device's serial URL open, its SSH port answer, its QEMU image exist."""

from __future__ import annotations

from bench.fleet import Device
from bench.links.spec import ProbeResult

__all__ = ["ProbeResult", "probe_link"]


async def probe_link(device: Device, timeout_s: float = 3.0) -> ProbeResult:
    """Probe `device` through its link, without talking to its agent."""
    if device.link is None:
        return ProbeResult(False, "virtual device not started (no link)")
    try:
        result = await device.link.probe(device.kind, timeout_s)
    except TimeoutError:
        result = ProbeResult(False, f"no answer within {timeout_s:g} s")
    if not result.reachable and device.os is not None:  # blank or broken OS: `flash --os` writes its image
        return ProbeResult(True, f"{result.detail}; its OS image will be written (flash --os)")
    return result

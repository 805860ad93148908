"""Link-level probes: does a device's serial URL open, its SSH port answer, its QEMU image exist."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.fleet import Device, QemuLink, SerialLink, SshLink


@dataclass
class ProbeResult:
    """Whether a device answered on its link, and what was seen."""

    reachable: bool
    detail: str


async def probe_link(device: Device, timeout_s: float = 3.0) -> ProbeResult:
    """Probe `device` through its link, without talking to its agent."""
    link = device.link
    if link is None:
        return ProbeResult(False, "virtual device not started (no link)")
    try:
        if isinstance(link, SerialLink):
            return await asyncio.wait_for(asyncio.to_thread(_probe_serial, link), timeout_s)
        if isinstance(link, SshLink):
            return await asyncio.wait_for(_probe_ssh(link), timeout_s)
        return _probe_qemu(device.kind, link)
    except TimeoutError:
        return ProbeResult(False, f"no answer within {timeout_s:g} s")


def _probe_serial(link: SerialLink) -> ProbeResult:
    import serial

    try:
        port = serial.serial_for_url(link.url, baudrate=link.baud, timeout=0.5, do_not_open=True)
        port.open()
        port.close()
    except (serial.SerialException, OSError, ValueError) as exc:
        return ProbeResult(False, f"{link.url}: {exc}")
    return ProbeResult(True, f"{link.url} opens")


async def _probe_ssh(link: SshLink) -> ProbeResult:
    try:
        reader, writer = await asyncio.open_connection(link.host, link.port)
    except OSError as exc:
        return ProbeResult(False, f"{link.host}:{link.port}: {exc.strerror or exc}")
    try:
        banner = (await reader.readline()).decode("ascii", "replace").strip()
    finally:
        writer.close()
    if not banner.startswith("SSH-"):
        return ProbeResult(False, f"{link.host}:{link.port} answers but is not SSH ({banner[:40]!r})")
    return ProbeResult(True, f"{link.host}:{link.port} {banner}")


def _probe_qemu(kind: str, link: QemuLink) -> ProbeResult:
    binary = shutil.which(link.binary)
    if binary is None:
        return ProbeResult(False, f"{link.binary} not found (install qemu-system-arm)")
    if link.image is None:  # the image built from the kind's recipe, in the bench cache
        from bench.image.build import cached_image

        image = cached_image(kind)
        if image is None:  # the bench builds it itself (flash stage, `hilbench image build`): still usable
            return ProbeResult(True, f"{binary} found; image not built yet (`hilbench flash` builds it)")
        return ProbeResult(True, f"{binary}, built image {image.folder} ({link.timing})")
    if not Path(link.image).exists():
        return ProbeResult(False, f"image {link.image} missing (hilbench image build {kind})")
    return ProbeResult(True, f"{binary}, image {link.image} ({link.timing})")

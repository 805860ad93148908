"""Provision a Linux board's OS: check the image against the fleet, skip when the board's fingerprint already
matches, else power off, write with bmaptool (or the vendor's flasher), read back against the bmap, give the
storage back, power on, wait for SSH, mark and verify the fingerprint. One call per board, from its driver's
`flash()` when the OS is wanted (`hilbench flash --os`, the nightly)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.config.os_spec import OsSpec
from bench.core.cachefiles import sha256_file
from bench.core.errors import ConfigError, DeviceUnreachable
from bench.core.folders import open_append
from bench.core.steps import Progress, StepResult
from bench.image.build import build_image
from bench.provision.bmap import check_against_image, read_bmap, verify_written, write_image
from bench.provision.controls import BoardControls, run_command
from bench.provision.fingerprint import Fingerprint, differences, read_fingerprint, write_marker

if TYPE_CHECKING:
    from bench.devices.linux import LinuxDriver

SSH_RETRY_S = 1.0


class ImageRefused(ConfigError):
    """The image is not the one the fleet pins: refused before anything was written."""


@dataclass(frozen=True)
class OsImage:
    """The image to write, checked against the fleet, and the fingerprint the board must show after."""

    path: Path
    bmap: Path | None
    sha256: str
    expect: dict[str, Any] = field(default_factory=dict)


def resolve_image(device_name: str, kind: str, spec: OsSpec) -> OsImage:
    """The image file for a board (building the bench's own when `image = "build"`), its sha256 checked
    against the fleet's pin. ImageRefused when they differ: nothing has been touched yet."""
    if spec.built:
        built = build_image(kind)
        if built.format != "disk":
            raise ConfigError(f"device {device_name!r}: the {kind} recipe does not build a disk image")
        path, bmap, sha = built.disk, built.bmap, built.disk_sha256
        expect = {k: v for k, v in (built.fingerprint or {}).items() if v}
    else:
        path, bmap = spec.image, spec.bmap
        if not path.is_file():
            raise ConfigError(f"device {device_name!r}: [device.os] image {path} does not exist")
        sha = sha256_file(path)
        expect = _manifest_fingerprint(path, sha)
    if spec.sha256 is not None and sha != spec.sha256:
        raise ImageRefused(
            f"device {device_name!r}: image {path.name} has sha256 {sha[:16]}..., the fleet pins {spec.sha256[:16]}...;"
            " refused before writing anything",
            hint='use the image the fleet names, or pin this one: [device.os] sha256 = "' + sha + '"',
        )
    if spec.method == "usb-storage" and (bmap is None or not bmap.is_file()):
        hint = f"bmaptool create -o {bmap} {path}"
        raise ConfigError(f"device {device_name!r}: bmap {bmap} does not exist", hint=hint)
    return OsImage(path, bmap, sha, {"image_sha256": sha, **expect, **spec.expect})


def _manifest_fingerprint(image: Path, sha: str) -> dict[str, Any]:
    """The fingerprint recorded by `hilbench image build` beside an image (its image.json), when it is this one."""
    try:
        data = json.loads((image.parent / "image.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = data.get("fingerprint") if data.get("disk_sha256") == sha else None
    return {k: v for k, v in (found or {}).items() if v}


async def probe(driver: LinuxDriver) -> tuple[Fingerprint | None, str]:
    """The board's fingerprint if it answers over SSH now, else (None, why not)."""
    try:
        conn = await driver.connection()
        return await read_fingerprint(conn), ""
    except (DeviceUnreachable, ConfigError) as exc:  # off, blank, or another OS with another host key
        return None, str(exc).splitlines()[0].split(": ", 2)[-1]
    finally:
        await driver.close_agent()


async def check_os(driver: LinuxDriver, progress: Progress) -> StepResult:
    """Without `--os`: compare the board's fingerprint with the fleet's image, write nothing."""
    device = driver.device
    assert device.os is not None
    started = time.monotonic()
    progress(0, 1, "os: fingerprint")
    image = await asyncio.to_thread(resolve_image, device.name, device.kind, device.os)
    before, why = await probe(driver)
    if before is None:
        raise DeviceUnreachable(f"{device.name}: cannot read its OS fingerprint: {why}",
                                hint="write its OS image: hilbench flash --os --device " + device.name)  # fmt: skip
    seconds = time.monotonic() - started
    if drift := differences(image.expect, before):
        return StepResult("os", False, f"OS fingerprint drifted: {'; '.join(drift)} (run: hilbench flash --os)",
                          seconds=seconds, figures={"fingerprint": before.as_dict()})  # fmt: skip
    return StepResult("os", True, f"up to date: {before.summary()}", skipped=True, seconds=seconds,
                      figures={"fingerprint": before.as_dict()})  # fmt: skip


async def provision_os(driver: LinuxDriver, controls: BoardControls, progress: Progress, *,
                       log: Path | None, force: bool = False) -> StepResult:  # fmt: skip
    """Make the board run the fleet's OS image. Skipped (StepResult.skipped) when its fingerprint matches."""
    device = driver.device
    spec = device.os
    assert spec is not None
    started = time.monotonic()
    progress(0, 6, "os: image")
    image = await asyncio.to_thread(resolve_image, device.name, device.kind, spec)
    progress(1, 6, "os: fingerprint")
    before, why = await probe(driver)
    drift = differences(image.expect, before) if before is not None else [why or "no answer"]
    if not drift and not force:
        return StepResult("os", True, f"up to date: {before.summary()}", skipped=True,
                          seconds=time.monotonic() - started, figures={"fingerprint": before.as_dict()})  # fmt: skip
    reason = "forced" if not drift else ("drifted: " if before is not None else "not answering: ") + "; ".join(drift)
    _note(log, f"os: reflashing ({reason})")
    figures: dict[str, Any] = {"reason": reason, "previous": before.as_dict() if before else None}
    if spec.method == "command":
        await _vendor_flash(device.name, spec, image, controls, log, progress, figures)
    else:
        await _bmap_flash(device.name, image, controls, log, progress, figures, spec.timeout_s)
    progress(4, 6, "os: booting")
    boot_started = time.monotonic()
    if controls.power is not None:
        await controls.power.on()
    conn = await _wait_ssh(driver, spec.boot_timeout_s)
    figures["boot_s"] = round(time.monotonic() - boot_started, 1)
    progress(5, 6, "os: verify")
    await write_marker(conn, image.sha256)
    after = await read_fingerprint(conn)
    figures["fingerprint"] = after.as_dict()
    if wrong := differences(image.expect, after):
        return StepResult("os", False, f"written and booted, but the fingerprint differs: {'; '.join(wrong)}",
                          seconds=time.monotonic() - started, figures=figures)  # fmt: skip
    progress(6, 6, "os: done")
    detail = f"flashed ({reason}); booted in {figures['boot_s']:.0f} s: {after.summary()}"
    return StepResult("os", True, detail, seconds=time.monotonic() - started, figures=figures)


async def _bmap_flash(name: str, image: OsImage, controls: BoardControls, log: Path | None, progress: Progress,
                      figures: dict[str, Any], timeout_s: float) -> None:  # fmt: skip
    if controls.storage is None:
        raise ConfigError(
            f"device {name!r}: [device.os] method usb-storage needs field 'storage' (the board's block device)",
            hint="see docs/linux-boards.md: USB-SD-Mux or mass-storage boot",
        )
    if controls.power is None:
        raise ConfigError(f"device {name!r}: [device.os] needs power_on and power_off commands to reflash the board")
    bmap = read_bmap(image.bmap)
    t0 = time.monotonic()
    progress(2, 6, "os: check bmap")
    figures["checked_bytes"] = await asyncio.to_thread(check_against_image, bmap, image.path, name)
    figures["check_s"] = round(time.monotonic() - t0, 1)
    await controls.power.off()  # only now: a bmap that lies is refused with the board still running
    target = await controls.storage.to_host()
    progress(2, 6, f"os: write {bmap.mapped_bytes / 1e6:.0f} MB")
    t0 = time.monotonic()
    await write_image(image.path, image.bmap, target, log, name, timeout_s)
    figures["write_s"] = round(time.monotonic() - t0, 1)
    figures["written_bytes"] = bmap.mapped_bytes
    await controls.storage.settle()
    progress(3, 6, "os: read back")
    t0 = time.monotonic()
    figures["verified_bytes"] = await asyncio.to_thread(verify_written, bmap, target, name)
    figures["verify_s"] = round(time.monotonic() - t0, 1)
    await controls.storage.to_board()


async def _vendor_flash(name: str, spec: OsSpec, image: OsImage, controls: BoardControls, log: Path | None,
                        progress: Progress, figures: dict[str, Any]) -> None:  # fmt: skip
    """The vendor's flasher (NVIDIA's l4t_initrd_flash.sh with the board in recovery mode): run with a timeout,
    its output in the log and its last line as progress."""
    argv = [a.format(image=image.path, bmap=image.bmap or "") for a in spec.command]
    if controls.power is not None:
        await controls.power.off()
    t0 = time.monotonic()
    await run_command(argv, f"{name}: flasher", spec.timeout_s, log, cwd=spec.workdir,
                      on_line=lambda line: progress(2, 6, f"os: {line[:40]}"))  # fmt: skip
    figures["write_s"] = round(time.monotonic() - t0, 1)


async def _wait_ssh(driver: LinuxDriver, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            return await driver.connection()
        except DeviceUnreachable as exc:
            last = str(exc).splitlines()[0]
        await driver.close_agent()  # a fresh connection for the next try
        if time.monotonic() > deadline:
            raise DeviceUnreachable(
                f"{driver.device.name}: no SSH within {timeout_s:g} s of power on ({last})",
                hint="the image was written and verified; check the board's console for its boot",
            )
        await asyncio.sleep(SSH_RETRY_S)


def _note(log: Path | None, text: str) -> None:
    if log is not None:
        with open_append(log) as fh:
            fh.write(f"{time.strftime('%H:%M:%S')} {text}\n")

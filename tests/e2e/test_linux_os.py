"""A virtual Pi 5 provisioned like a real one, end to end: a freshly built OS image written to the guest's
storage with bmaptool, booted in QEMU (Cortex-A76), fingerprinted; the agent runs on aarch64 and a replay
stores frames; an up-to-date board is skipped; an unpinned image and a bmap that lies are refused before
anything is written, the board left running;
a write garbled on its way to the storage is caught by the bmap check; a drifted OS is reported and
reflashed. Slow (several TCG boots): opt in with `pytest --run-slow`; the nightly e2e test runs the
representative part (provision + replay + OTA on the bundled fleet's guest Pi 5) in the default run."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from bench.config.fleet import Device, load_fleet
from bench.config.os_spec import OsSpec
from bench.devices.linux import LinuxDriver
from bench.image.build import BuiltImage, build_image
from bench.nightly.flashing import DeviceFlash, flash_devices
from bench.provision.bmap import read_bmap
from bench.provision.fingerprint import MARKER
from bench.replay.agents import fleet_opener
from bench.replay.service import replay_fleet
from bench.replay.synth import synth_session
from bench.store.results import open_store
from bench.virtual import board_controls, virtual_fleet
from bench.virtual.arm64_board import VirtualArm64Board

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def os_step(result: DeviceFlash):
    return next(s for s in result.steps if s.step == "os")


def test_virtual_pi5_is_provisioned_like_a_real_one(tmp_path: Path) -> None:
    fresh: BuiltImage = build_image("pi5", root=tmp_path / "images", force=True)
    assert fresh.built and fresh.format == "disk"
    pinned = OsSpec(image=fresh.disk, sha256=fresh.disk_sha256, bmap=fresh.bmap)
    device = dataclasses.replace(load_fleet().get("pi5-1"), name="pi5-os", os=pinned)
    asyncio.run(scenario(device, fresh, tmp_path))


async def scenario(device: Device, fresh: BuiltImage, tmp: Path) -> None:
    logs = tmp / "logs"
    async with virtual_fleet([device]) as (devices, running):
        board = running[device.name]
        assert isinstance(board, VirtualArm64Board) and board.boot_error == "the storage is blank"
        boards = board_controls(running)

        async def flash(dev: Device = devices[0], **kw) -> DeviceFlash:
            (result,) = await flash_devices([dev], logs, lambda d: (lambda *a: None), os=True, boards=boards,
                                            attempts=1, **kw)  # fmt: skip
            return result

        # 1. a blank board: written, booted, fingerprint matches, agent deployed
        first = await flash()
        assert first.ok, first.reason
        step = os_step(first)
        assert not step.skipped and "not answering" in step.detail
        fp = step.figures["fingerprint"]
        assert fp["image_sha256"] == fresh.disk_sha256 and fp["kernel_release"] == fresh.kernel_release
        assert fp["os_release"]["ID"] == "debian" and step.figures["verified_bytes"] > 100e6

        # 2. the agent runs on aarch64 and a replay stores frames
        driver = LinuxDriver(devices[0])
        session = await driver.open_session()
        try:
            assert session.info["platform"].startswith("linux-aarch64"), session.info
        finally:
            await session.close()
            await driver.close_agent()
        store = open_store(tmp / "results.sqlite")
        replay = await replay_fleet(devices, synth_session("combat", 3, duration_s=4.0), store,
                                    make_opener=lambda run_id: fleet_opener(store, run_id, logs))  # fmt: skip
        (run,) = replay.devices
        assert run.status == "ok", run.detail
        assert store.frames.frame_count(replay.run_id, device.name) > 20

        # 3. up to date: skipped
        again = await flash()
        assert again.ok and os_step(again).skipped and "up to date" in os_step(again).detail

        # 4. an image the fleet does not pin: refused before anything is written
        before = board.disk.stat().st_mtime_ns
        wrong = dataclasses.replace(devices[0], os=dataclasses.replace(device.os, sha256="0" * 64))
        refused = await flash(wrong)
        assert not refused.ok and "refused before writing" in refused.reason
        assert board.disk.stat().st_mtime_ns == before and board.powered

        # 4b. a bmap that lies about the pinned image (one range's checksum): refused before the power goes
        # off, even with --reflash; the board runs what it had (issue 31 case 6)
        lying = tmp / "lying.bmap"
        text = fresh.bmap.read_text()
        chksum = read_bmap(fresh.bmap).ranges[0][2]
        lying.write_text(text.replace(f'chksum="{chksum}"', f'chksum="{"0" * len(chksum)}"', 1))
        liar = dataclasses.replace(devices[0], os=dataclasses.replace(device.os, bmap=lying))
        refused = await flash(liar, force_os=True)
        assert not refused.ok and refused.refused and "checksum of blocks" in refused.reason, refused.reason
        assert str(lying) in refused.reason
        assert board.disk.stat().st_mtime_ns == before and board.powered
        driver = LinuxDriver(devices[0])
        conn = await driver.connection()  # still up, on the OS it had
        assert (await conn.run(f"cat {MARKER}")).text.strip() == fresh.disk_sha256
        await driver.close_agent()

        # 5. garbled on its way to the storage: the bmap read-back catches it, the board is not booted
        bmap = read_bmap(fresh.bmap)
        first_block, last_block, _ = max(bmap.ranges, key=lambda r: r[1] - r[0])
        board.corrupt_next_write((first_block + last_block) // 2 * bmap.block_size)
        garbled = await flash(force_os=True)
        assert not garbled.ok and "does not match the bmap" in garbled.reason, garbled.reason
        assert not board.powered

        # 6. reflashed from there; then a drifted OS (someone upgraded it by hand) is reported and reflashed
        repaired = await flash()
        assert repaired.ok and not os_step(repaired).skipped
        driver = LinuxDriver(devices[0])
        conn = await driver.connection()
        await conn.run("sed -i 's/^VERSION_ID=.*/VERSION_ID=\"13\"/' /etc/os-release && sync")
        await driver.close_agent()
        checked = await flash_devices(devices, logs, lambda d: lambda *a: None, os=False, attempts=1)
        assert not checked[0].ok and "drifted: os-release VERSION_ID '13' != '12'" in checked[0].reason
        drifted = await flash()
        assert drifted.ok and "drifted: os-release VERSION_ID" in os_step(drifted).detail
        driver = LinuxDriver(devices[0])
        conn = await driver.connection()
        assert (await conn.run(f"cat {MARKER}")).text.strip() == fresh.disk_sha256
        await driver.close_agent()

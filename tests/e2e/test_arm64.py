"""The switch-arm64 image end to end: reproducible build, real QEMU boots, the guest's runtime, faults,
and no QEMU left behind. Heavy: every boot is a TCG guest on a small machine."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.config.fleet import Device, load_fleet
from bench.devices.qemu_arm64 import QemuArm64Driver
from bench.devices.qemu_machine import GuestFault
from bench.image.build import BuiltImage, build_image
from tests.conftest import alive

pytestmark = pytest.mark.e2e
COMMANDS_IN_A_ROW = 20
FRAMES_AFTER_FAULT = 5 + 30 * 60  # a fault injected after the 5th frame ends the loop before a minute of frames more
REPO = Path(__file__).resolve().parent.parent.parent


def my_qemus() -> list[int]:
    """QEMU processes (not zombies) whose parent is this test process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        if "qemu-system" in comm and fields[0] != "Z" and int(fields[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(autouse=True)
def _no_qemu_left() -> Iterator[None]:
    yield
    assert my_qemus() == [], "a QEMU started by this test is still running"


def switch_device(timing: str = "realtime", **settings: object) -> Device:
    dev = load_fleet().get("switch-1")
    return dataclasses.replace(dev, link=dataclasses.replace(dev.link, timing=timing)).with_settings(**settings)


@pytest.fixture(scope="session")
def arm64_image() -> BuiltImage:
    """The image for the current recipe, built once into the bench cache (reused when unchanged)."""
    return build_image("switch-arm64")


def test_image_build_is_reproducible_and_cached(tmp_path: Path, arm64_image: BuiltImage) -> None:
    """A fresh build (shared download cache, new folder) gives the bytes of the cached build."""
    first = build_image("switch-arm64", root=tmp_path / "a", force=True)
    assert first.built and first.folder != arm64_image.folder
    assert first.initrd_sha256 == arm64_image.initrd_sha256
    assert first.kernel_sha256 == arm64_image.kernel_sha256
    again = build_image("switch-arm64", root=tmp_path / "a")
    assert not again.built and again.initrd_sha256 == first.initrd_sha256
    with first.initrd.open("r+b") as f:  # a damaged cache entry is noticed and rebuilt
        f.seek(1000)
        f.write(b"\xff" * 16)
    repaired = build_image("switch-arm64", root=tmp_path / "a")
    assert repaired.built and repaired.initrd_sha256 == first.initrd_sha256
    assert first.initrd_bytes < 80e6, "the image grew: check the recipe's [trim]"


async def _boot_idle(driver: QemuArm64Driver) -> None:
    driver.mode = "idle"
    machine = await driver.boot()
    await machine.wait_for("idle", driver.boot_timeout)


async def _fault_during_session(driver: QemuArm64Driver, inject) -> tuple[list, str | None]:
    """Open the agent, start the frame loop, inject a fault; the frames that came before the link ended,
    and the driver's account of what happened."""
    from bench.agent.session import AgentSession, LoopStart

    try:
        session = await AgentSession.open(await driver.open_agent(), device="switch-1", hello_timeout=60.0)
        await session.start(LoopStart(fps=30, vsync_hz=60, frames=0))
        frames = []
        async for record in session.frames(timeout=60.0):
            frames.append(record)
            if len(frames) == 5:
                await inject()
            assert len(frames) < FRAMES_AFTER_FAULT, "the guest went on running after the fault: it never came"
        await session.close()
        await driver.machine.wait_exit(30.0)
        return frames, driver.fault()
    finally:
        await driver.close_agent()


def test_guest_panic_during_a_run_is_detected(tmp_path: Path, arm64_image: BuiltImage) -> None:
    driver = QemuArm64Driver(switch_device("icount"), tmp_path)

    async def panic() -> None:
        # commands back to back, each on a new connection, all answered (none dropped between two of them)
        replies = [await driver.machine.control("status") for _ in range(COMMANDS_IN_A_ROW)]
        assert all("mode=agent" in reply for reply in replies), replies
        # a counted guest runs at the host's lowest CPU priority: contention stretches only its wall time
        assert os.getpriority(os.PRIO_PROCESS, driver.machine.pid) == 19
        await driver.machine.control("panic", timeout=5.0)

    frames, fault = asyncio.run(_fault_during_session(driver, panic))
    assert len(frames) >= 5
    assert fault == "switch-1: the guest kernel panicked: sysrq triggered crash"
    assert not alive(driver.machine.pid)


@pytest.mark.slow  # opt-in (--run-slow): the guest-panic test above shows a dead guest detected by default
def test_qemu_killed_during_a_run_is_detected(tmp_path: Path, arm64_image: BuiltImage) -> None:
    driver = QemuArm64Driver(switch_device(), tmp_path)

    async def kill() -> None:
        os.kill(driver.machine.pid, signal.SIGKILL)

    frames, fault = asyncio.run(_fault_during_session(driver, kill))
    assert len(frames) >= 5
    assert fault is not None and "switch-1: QEMU ended unexpectedly (killed by signal SIGKILL)" in fault
    assert not alive(driver.machine.pid)


def test_agent_over_memory_limit_is_detected(tmp_path: Path, arm64_image: BuiltImage) -> None:
    driver = QemuArm64Driver(switch_device(memory_limit_mb=12), tmp_path)

    async def run() -> str:
        try:
            with pytest.raises(GuestFault) as info:
                await driver.open_agent()  # the agent process outgrows its cgroup while it starts
            return str(info.value)
        finally:
            await driver.close_agent()

    message = asyncio.run(run())
    assert "switch-1: the agent exceeded its memory limit of 12 MB inside the guest and was OOM-killed" in message
    assert not alive(driver.machine.pid)


_ORPHAN_SCRIPT = """
import asyncio, sys
from pathlib import Path
from bench.devices.qemu_arm64 import QemuArm64Driver
from bench.config.fleet import load_fleet

async def main():
    driver = QemuArm64Driver(load_fleet().get("switch-1"), Path(sys.argv[1]), mode="idle")
    await driver.boot()
    print(driver.machine.pid, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_killed_bench_leaves_no_qemu(tmp_path: Path, arm64_image: BuiltImage) -> None:
    bench = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        pid = int(bench.stdout.readline())
        assert alive(pid)
        bench.kill()  # SIGKILL: no teardown code runs in the bench
        bench.wait()
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid), "QEMU outlived the bench process"
    finally:
        bench.kill()


def test_int8_model_runs_in_guest_with_repeatable_icount_timing(tmp_path: Path, arm64_image: BuiltImage) -> None:
    """python3 + numpy + tflite-runtime 2.14 run the factory int8 model in the guest; under -icount shift=0
    the median and P90 invoke times repeat exactly from boot to boot."""

    async def run() -> dict[str, object]:
        driver = QemuArm64Driver(switch_device("icount"), tmp_path)
        try:
            return await driver.selftest()
        finally:
            await driver.close_agent()
            assert not alive(driver.machine.pid)

    first, second = asyncio.run(run()), asyncio.run(run())
    assert first["tflite_runtime"] == "2.14.0" and first["numpy"].startswith("1.24") and first["timing"] == "icount"
    assert first["model"] == "npc-policy-int8.tflite" and first["runs"] == len(first["invoke_us"]) == 200
    for report in (first, second):
        times = report["invoke_us"]
        assert 0 < times[0] <= times[-1]
    assert first["invoke_us"][100] == second["invoke_us"][100]  # median
    assert first["invoke_us"][179] == second["invoke_us"][179]  # P90


def test_the_guest_runs_the_model_its_device_is_configured_with(tmp_path: Path, arm64_image: BuiltImage) -> None:
    """A team's model (`--model`, a check's candidate) reaches the console: its deploy puts the model in front of
    the image and the agent's hello names it; without it nothing is put there, and the factory model boots."""
    from bench.agent.session import AgentSession
    from bench.bundles.fingerprint import configured_model_sha256

    team = tmp_path / "team-policy-int8.tflite"
    team.write_bytes((REPO / "fixtures" / "models" / "npc-policy-63k-int8.tflite").read_bytes())

    async def run(device: Device) -> tuple[list, dict]:
        driver = QemuArm64Driver(device, tmp_path)
        steps = await driver.flash()
        try:
            session = await AgentSession.open(await driver.open_agent(), device=device.name, hello_timeout=60.0)
            await session.close()
        finally:
            await driver.close_agent()
        return steps, session.info["model"]

    candidate = switch_device(model=str(team))
    steps, model = asyncio.run(run(candidate))
    assert steps[-1].step == "model" and not steps[-1].skipped and "team-policy-int8.tflite" in steps[-1].detail
    assert model["sha256"] == configured_model_sha256(candidate) and model["name"] == "team-policy"
    # the factory model: nothing put in front of the image (test_arm64_agent.py's booted guest says hello with it)
    factory = switch_device()
    steps = asyncio.run(QemuArm64Driver(factory, tmp_path).flash())
    assert steps[-1].step == "model" and steps[-1].skipped, steps
    assert configured_model_sha256(factory) != configured_model_sha256(candidate)


def test_image_cli_reports_the_cached_build(arm64_image: BuiltImage, tmp_path: Path) -> None:
    import json

    build = subprocess.run(
        [sys.executable, "-m", "bench", "image", "build", "switch-arm64", "--json"], cwd=REPO, capture_output=True
    )
    assert build.returncode == 0, build.stderr
    data = json.loads(build.stdout)
    assert data["built"] is False and data["initrd_sha256"] == arm64_image.initrd_sha256
    show = subprocess.run(
        [sys.executable, "-m", "bench", "image", "show", "switch-arm64"], cwd=REPO, capture_output=True
    )
    assert show.returncode == 0 and str(arm64_image.folder) in show.stdout.decode()
    empty = {**os.environ, "HILBENCH_CACHE_DIR": str(tmp_path)}
    missing = subprocess.run(
        [sys.executable, "-m", "bench", "image", "show", "switch-arm64"], cwd=REPO, capture_output=True, env=empty
    )
    assert missing.returncode == 1 and b"hilbench image build switch-arm64" in missing.stdout
    bad = subprocess.run([sys.executable, "-m", "bench", "image", "build", "jetson"], cwd=REPO, capture_output=True)
    assert bad.returncode == 2 and b"no image recipe for kind 'jetson'" in bad.stderr


@pytest.mark.slow  # opt-in (--run-slow): a rare host condition; every other guest test boots
def test_boot_retries_when_a_forwarded_port_was_taken(
    tmp_path: Path, arm64_image: BuiltImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    from bench.devices import qemu_machine

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_free_port = qemu_machine.free_port
    handed: list[int] = []

    def first_one_taken(kind: int = socket.SOCK_STREAM) -> int:
        port = taken if not handed else real_free_port(kind)
        handed.append(port)
        return port

    monkeypatch.setattr(qemu_machine, "free_port", first_one_taken)
    driver = QemuArm64Driver(switch_device(), tmp_path)

    async def run() -> int:
        try:
            await _boot_idle(driver)
            return driver.machine.agent_port
        finally:
            await driver.close_agent()

    try:
        port = asyncio.run(run())
    finally:
        squatter.close()
    assert handed[0] == taken and port != taken
    assert "Could not set up host forwarding rule" in (tmp_path / "switch-1.console.log").read_text()

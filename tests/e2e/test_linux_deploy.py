"""Deploy by hash and the runtime check on virtual Jetson / Pi 5 boards, through real sshd."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from bench.core.errors import BenchError, ConfigError
from bench.devices import driver_for
from bench.devices.linux import LinuxDriver
from tests.linux_support import LINUX_KINDS, RunningBoard, virtual_board

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=LINUX_KINDS)
def board(request: pytest.FixtureRequest) -> Iterator[RunningBoard]:
    with virtual_board(request.param) as running:
        yield running


def test_deploy_sends_only_what_changed(board: RunningBoard) -> None:
    driver = driver_for(board.device)
    assert isinstance(driver, LinuxDriver)
    files = {"agent/a.py": b"print('a')\n", "agent/b.py": b"print('b')\n", "models/m.tflite": bytes(range(256)) * 40}

    async def go():
        try:
            first = await driver.deploy_files(files)
            second = await driver.deploy_files(files)
            third = await driver.deploy_files({**files, "agent/b.py": b"print('b2')\n"})
            return first, second, third
        finally:
            await driver.close()

    first, second, third = board.loop.run(go())
    assert first.figures["files_sent"] == 3 and not first.skipped
    assert second.figures["files_sent"] == 0 and second.skipped
    assert third.figures["files_sent"] == 1 and third.figures["bytes_sent"] == len(b"print('b2')\n")
    deployed = board.virtual.root / "home" / "npc-hil-bench"
    assert (deployed / "agent/b.py").read_bytes() == b"print('b2')\n"
    assert (deployed / "models/m.tflite").read_bytes() == files["models/m.tflite"]


def test_deploy_repairs_a_file_changed_on_the_device(board: RunningBoard) -> None:
    driver = driver_for(board.device)
    files = {"agent/c.py": b"good\n"}

    async def go():
        try:
            await driver.deploy_files(files)
            (board.virtual.root / "home/npc-hil-bench/agent/c.py").write_bytes(b"tampered\n")
            return await driver.deploy_files(files)
        finally:
            await driver.close()

    assert board.loop.run(go()).figures["files_sent"] == 1
    assert (board.virtual.root / "home/npc-hil-bench/agent/c.py").read_bytes() == b"good\n"


def test_runtime_check_finds_the_tflite_runtime(board: RunningBoard) -> None:
    driver = driver_for(board.device)

    async def go():
        try:
            return await driver.check()
        finally:
            await driver.close()

    report = board.loop.run(go())
    assert report.ok and report.runtime.startswith("ai-edge-litert ") and report.numpy


def test_runtime_check_says_exactly_what_is_missing(board: RunningBoard) -> None:
    """Debian's own python3 has neither numpy nor a tflite runtime."""
    device = board.device
    bare = dataclasses.replace(device, extra={**device.extra, "python": "/usr/bin/python3"})
    driver = driver_for(bare)

    async def go():
        try:
            return await driver.check()
        finally:
            await driver.close()

    with pytest.raises(BenchError) as info:
        board.loop.run(go())
    text = str(info.value)
    assert f"device '{device.name}'" in text and "/usr/bin/python3" in text
    assert "no tflite runtime" in text and "numpy missing" in text and "hint:" in text


def test_missing_python_is_a_config_error(board: RunningBoard) -> None:
    device = board.device
    nowhere = dataclasses.replace(device, extra={"python": "/opt/no-such/python3"})
    driver = driver_for(nowhere)

    async def go():
        try:
            return await driver.check()
        finally:
            await driver.close()

    with pytest.raises(ConfigError, match="no Python at '/opt/no-such/python3'"):
        board.loop.run(go())

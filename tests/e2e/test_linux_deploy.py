"""Deploy by hash and the runtime check on virtual Jetson / Pi 5 boards, through real sshd."""

from __future__ import annotations

import dataclasses

import pytest

from bench.core.errors import BenchError, ConfigError
from bench.devices.linux import LinuxDriver
from tests.linux_support import RunningBoard

pytestmark = pytest.mark.e2e


def test_deploy_sends_only_what_changed(linux_board: RunningBoard) -> None:
    files = {"agent/a.py": b"print('a')\n", "agent/b.py": b"print('b')\n", "models/m.tflite": bytes(range(256)) * 40}

    async def deploy_thrice(driver):
        assert isinstance(driver, LinuxDriver)
        first = await driver.deploy_files(files)
        second = await driver.deploy_files(files)
        third = await driver.deploy_files({**files, "agent/b.py": b"print('b2')\n"})
        return first, second, third

    first, second, third = linux_board.drive(deploy_thrice)
    assert first.figures["files_sent"] == 3 and not first.skipped
    assert second.figures["files_sent"] == 0 and second.skipped
    assert third.figures["files_sent"] == 1 and third.figures["bytes_sent"] == len(b"print('b2')\n")
    deployed = linux_board.virtual.root / "home" / "npc-hil-bench"
    assert (deployed / "agent/b.py").read_bytes() == b"print('b2')\n"
    assert (deployed / "models/m.tflite").read_bytes() == files["models/m.tflite"]


def test_deploy_repairs_a_file_changed_on_the_device(linux_board: RunningBoard) -> None:
    files = {"agent/c.py": b"good\n"}

    async def tamper_and_deploy(driver):
        await driver.deploy_files(files)
        (linux_board.virtual.root / "home/npc-hil-bench/agent/c.py").write_bytes(b"tampered\n")
        return await driver.deploy_files(files)

    assert linux_board.drive(tamper_and_deploy).figures["files_sent"] == 1
    assert (linux_board.virtual.root / "home/npc-hil-bench/agent/c.py").read_bytes() == b"good\n"


def test_runtime_check_finds_the_tflite_runtime(linux_board: RunningBoard) -> None:
    report = linux_board.drive(lambda driver: driver.check())
    assert report.ok and report.runtime.startswith("ai-edge-litert ") and report.numpy


def test_runtime_check_says_exactly_what_is_missing(linux_board: RunningBoard) -> None:
    """Debian's own python3 has neither numpy nor a tflite runtime."""
    device = linux_board.device
    bare = dataclasses.replace(device, python="/usr/bin/python3")
    with pytest.raises(BenchError) as info:
        linux_board.drive(lambda driver: driver.check(), bare)
    text = str(info.value)
    assert f"device '{device.name}'" in text and "/usr/bin/python3" in text
    assert "no tflite runtime" in text and "numpy missing" in text and "hint:" in text


def test_missing_python_is_a_config_error(linux_board: RunningBoard) -> None:
    nowhere = dataclasses.replace(linux_board.device, python="/opt/no-such/python3")
    with pytest.raises(ConfigError, match="no Python at '/opt/no-such/python3'"):
        linux_board.drive(lambda driver: driver.check(), nowhere)

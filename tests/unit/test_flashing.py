"""Fleet flashing logic with stand-in drivers: retries, backoff, isolation of failures, refusals."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from bench.config.fleet import Device
from bench.config.kinds import KINDS
from bench.core.errors import ConfigError
from bench.devices.base import Driver, StepResult
from bench.nightly.flashing import flash_devices

PLANS: dict[str, list[object]] = {}  # device name -> what each attempt does


class ScriptedDriver(Driver):
    """Plays back PLANS[name]: a list of 'ok', 'fail', an exception instance."""

    async def flash(self, progress=None) -> list[StepResult]:
        action = PLANS[self.device.name].pop(0)
        await asyncio.sleep(0.01)
        if isinstance(action, Exception):
            raise action
        return [StepResult("firmware", action == "ok", "" if action == "ok" else "port vanished mid-write")]

    async def open_agent(self):
        raise NotImplementedError

    async def close_agent(self) -> None:
        pass


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[Device]:
    monkeypatch.setitem(KINDS, "pi5", dataclasses.replace(KINDS["pi5"], driver=f"{__name__}:ScriptedDriver"))
    return [Device(f"p{i}", "pi5", None) for i in range(3)]


def test_failures_are_retried_isolated_and_reported(scripted: list[Device], tmp_path: Path) -> None:
    PLANS.update(p0=["ok"], p1=["fail", RuntimeError("timeout"), "ok"], p2=["fail", "fail", "fail"])
    results = asyncio.run(flash_devices(scripted, tmp_path, lambda d: lambda *a: None, backoff_s=0.01))
    assert [(r.name, r.ok, r.attempts) for r in results] == [("p0", True, 1), ("p1", True, 3), ("p2", False, 3)]
    assert results[2].reason == "firmware: port vanished mid-write"
    log = (tmp_path / "p1.log").read_text()
    assert "failed: RuntimeError: timeout" in log and "attempt 3/3" in log


def test_bad_input_is_not_retried(scripted: list[Device], tmp_path: Path) -> None:
    PLANS.update(p0=[ConfigError("firmware x.bin: refused: image is for ESP32-S3, not ESP32-C6")])
    [result] = asyncio.run(flash_devices(scripted[:1], tmp_path, lambda d: lambda *a: None, backoff_s=0.01))
    assert not result.ok and result.attempts == 1 and "refused" in result.reason


def test_flash_cli_rejects_a_missing_firmware_file_with_exit_2() -> None:
    import subprocess

    from tests.conftest import REPO, hilbench

    done = subprocess.run(hilbench("flash", "--device", "c6-a", "--firmware", "/nonexistent/fw.bin"), cwd=REPO,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "firmware /nonexistent/fw.bin does not exist" in done.stderr


def test_a_real_board_without_configured_firmware_is_refused(tmp_path: Path) -> None:
    from bench.config.fleet import SerialLink
    from bench.devices.esp32c6 import Esp32c6Driver

    real = Device("bench-c6", "esp32c6", SerialLink("/dev/ttyACM0", 921600))
    with pytest.raises(ConfigError, match="no firmware configured for a real board"):
        asyncio.run(Esp32c6Driver(real).flash())

"""`hilbench doctor` and the nightly's check stage name what the host lacks for the selected devices."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.core.programs import load_manifest
from bench.lab.doctor import FAIL, device_needs, device_problems
from bench.nightly.orchestration import _check
from tests.conftest import REPO, hilbench


def path_without(tmp_path: Path, *left_out: str) -> str:
    """A PATH folder with a link to every manifest program this host has, except `left_out`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for program in load_manifest():
        found = program.find()
        if found and not set(program.names) & set(left_out):
            (folder / Path(found).name).symlink_to(found)
    return str(folder)


def doctor(path: str, *args: str) -> tuple[int, dict]:
    env = {**os.environ, "PATH": path}
    proc = subprocess.run(hilbench("doctor", "--json", *args), cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def finding(report: dict, check: str) -> dict:
    return next(f for f in report["findings"] if f["check"] == check)


def test_doctor_names_bmap_tools_and_exits_2_without_bmaptool(tmp_path):
    code, report = doctor(path_without(tmp_path, "bmaptool"))
    bmap = finding(report, "program bmaptool")
    assert code == 2 and not report["ok"]
    assert bmap["status"] == FAIL and bmap["fix"] == "apt-get install -y bmap-tools"
    assert set(bmap["devices"]) == {"orin-1", "pi5-1"}  # the boards with an OS image; the console needs none
    code, report = doctor(os.environ["PATH"])  # with bmap-tools installed
    assert finding(report, "program bmaptool")["status"] == "ok"
    assert code == (2 if any(f["status"] == FAIL for f in report["findings"]) else 0)


def test_doctor_needs_only_what_the_selected_devices_need(tmp_path):
    code, report = doctor(path_without(tmp_path, "bmaptool"), "--kind", "esp32c6")
    assert code == 0, [f for f in report["findings"] if f["status"] == FAIL]
    assert finding(report, "program bmaptool")["status"] == "warn"  # only the test suite's provision tests need it


def test_device_needs_follow_the_fleet():
    fleet = load_fleet()
    assert {"os-image", "disk-build", "qemu", "power:uhubctl", "virtual:pi5"} <= device_needs(fleet.get("pi5-1"))
    console = device_needs(fleet.get("switch-1"))
    assert {"qemu", "os-build"} <= console and "disk-build" not in console
    assert "qemu" not in device_needs(fleet.get("c6-a"))


def test_check_stage_fails_the_device_naming_the_package(tmp_path, monkeypatch):
    fleet = load_fleet()
    monkeypatch.setenv("PATH", path_without(tmp_path, "bmaptool"))
    assert [f.check for f in device_problems(fleet.get("pi5-1"))] == ["program bmaptool"]
    outcomes = asyncio.run(_check([fleet.get("pi5-1")]))
    assert not outcomes["pi5-1"].ok and "bmap-tools" in outcomes["pi5-1"].detail


@pytest.mark.parametrize("args", [["--fleet", "/nonexistent.toml"], ["--kind", "toaster"]])
def test_bad_selection_is_a_usage_error(args):
    proc = subprocess.run(hilbench("doctor", *args), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "error:" in proc.stderr


def test_pyserial_shadowed_by_another_serial_module_is_named(tmp_path, monkeypatch):
    import serial

    from bench.lab.doctor import check_pyserial

    assert check_pyserial().status == "ok"  # .ci/setup installs plain pyserial last
    fork = tmp_path / "serial" / "__init__.py"
    fork.parent.mkdir()
    fork.write_text("# pyserial-labgrid's copy\n__version__ = '3.5.0.2'\n")
    monkeypatch.setattr(serial, "__file__", str(fork))
    shadowed = check_pyserial()
    assert shadowed.status == FAIL and "pyserial-labgrid" in shadowed.detail
    assert "--force-reinstall --no-deps pyserial==3.5" in shadowed.fix


def test_device_commands_refuse_the_pyserial_fork_at_start(tmp_path, monkeypatch, capsys):
    import serial

    from bench.cli import main

    fork = tmp_path / "serial" / "__init__.py"
    fork.parent.mkdir()
    fork.write_text("# pyserial-labgrid's copy\n")
    monkeypatch.setattr(serial, "__file__", str(fork))
    assert main(["fleet", "list", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert "pyserial-labgrid" in error["message"] and "--force-reinstall" in error["hint"]

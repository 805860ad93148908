"""The pytest plugin in a real pytest subprocess: parametrization by kind, ids, skips and log folders."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from tests.conftest import REPO

DEVICE_TESTS = """
import pytest

@pytest.mark.kinds("esp32c6")
def test_on_boards(device, device_log_dir):
    (device_log_dir / "seen.txt").write_text(device.name)
    assert device.kind == "esp32c6"

@pytest.mark.kinds("pi5")
def test_on_pis(device):
    pass

def test_on_every_device(device, fleet):
    assert device.name in [d.name for d in fleet]
"""


def run_pytest(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    fleet = tmp_path / "two.toml"
    fleet.write_text(
        f'[[device]]\nname = "c6-x"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{port}"\n'
        f'[[device]]\nname = "c6-y"\nkind = "esp32c6"\nport = "socket://127.0.0.1:{port}"\n'
    )
    (tmp_path / "test_devices.py").write_text(DEVICE_TESTS)
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_devices.py",
            "--fleet",
            str(fleet),
            f"--junitxml={junit}",
            "--hil-log-dir",
            str(tmp_path / "logs"),
            "-p",
            "no:cacheprovider",
            "-rs",
            "-v",
            *extra,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    listener.close()
    outcomes: dict[str, str] = {}
    if not junit.exists():
        return proc, outcomes
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None  # properties are not failures
        status = "skipped" if case.find("skipped") is not None else "failed" if failed else "passed"
        outcomes[case.get("name")] = status
    return proc, outcomes


def test_device_tests_run_once_per_matching_device(tmp_path: Path) -> None:
    proc, outcomes = run_pytest(tmp_path)
    assert outcomes == {
        "test_on_boards[c6-x]": "passed",
        "test_on_boards[c6-y]": "passed",
        "test_on_pis[no-device]": "skipped",
        "test_on_every_device[c6-x]": "passed",
        "test_on_every_device[c6-y]": "passed",
    }, proc.stdout + proc.stderr
    assert f"no device of kind pi5 in fleet {tmp_path / 'two.toml'}" in proc.stdout
    logs = sorted(p.read_text() for p in (tmp_path / "logs").rglob("seen.txt"))
    assert logs == ["c6-x", "c6-y"]


def test_device_option_narrows_the_selection(tmp_path: Path) -> None:
    proc, outcomes = run_pytest(tmp_path, "--device", "c6-y")
    assert outcomes["test_on_boards[c6-y]"] == "passed" and "test_on_boards[c6-x]" not in outcomes, proc.stdout


def test_unknown_device_is_a_usage_error(tmp_path: Path) -> None:
    proc, _ = run_pytest(tmp_path, "--device", "nope")
    assert proc.returncode == 4 and "no device named 'nope'" in proc.stderr

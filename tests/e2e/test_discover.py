"""End to end: `fleet discover` finds a virtual ESP32-C6 behind a pty (pyserial's port list substituted at
`bench.devices.discovery.list_ports`, the one function that asks the OS), identifies it with the real esptool and
mpremote paths, and writes a fleet entry that `fleet check` accepts; a second run adds nothing (same MAC)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from serial.tools.list_ports_common import ListPortInfo

from bench import cli
from bench.config.fleet import load_fleet
from bench.devices import discovery
from tests.conftest import hilbench
from tests.esp32c6_support import FIRMWARE, preflash, virtual_c6

pytestmark = pytest.mark.e2e
MAC = "60:55:f9:c6:40:07"


def _usb_port(device: str, vid: int, pid: int, serial_number: str) -> ListPortInfo:
    info = ListPortInfo(device, skip_link_detection=True)
    info.vid, info.pid, info.serial_number = vid, pid, serial_number
    return info


def test_discover_a_board_behind_a_pty_and_write_a_fleet_fleet_check_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = preflash(tmp_path / "c6", FIRMWARE.read_bytes())
    with virtual_c6(state, name="c6-disc", mac=MAC) as board:
        assert board.wait_mode("app")["mode"] == "app"
        pty = board.urls["pty"]
        ports = [
            _usb_port(pty, 0x303A, 0x1001, "60:55:F9:C6:40:07"),
            _usb_port("/dev/ttyS0", None, None, ""),  # a motherboard UART: not a USB bridge, left alone
        ]
        monkeypatch.setattr(discovery, "list_ports", lambda: ports)

        assert cli.main(["fleet", "discover"]) == 0
        printed = capsys.readouterr().out
        assert f'port = "{pty}"' in printed and f'mac = "{MAC}"' in printed

        fleet_file = tmp_path / "lab.toml"
        assert cli.main(["fleet", "discover", "--write", str(fleet_file), "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
        (seen,) = found["boards"]
        assert seen["chip"] == "ESP32-C6" and seen["mac"] == MAC and seen["kind"] == "esp32c6"
        assert seen["flash_size"] == 8 * 1024 * 1024 and seen["micropython"]
        assert seen["usb_id"] == "303a:1001"
        (device,) = load_fleet(fleet_file).devices
        assert device.kind == "esp32c6" and device.link.url == pty and device.mac == MAC
        assert device.settings.flash_size == 8 * 1024 * 1024

        # the board went back to MicroPython after being identified, and the fleet file is a working one
        assert board.wait_mode("app")["mode"] == "app"
        check = subprocess.run(hilbench("fleet", "check", "--fleet", str(fleet_file), "--json"),
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["devices"][0]["reachable"]

        # again: the board is already listed (by MAC), nothing is added
        before = fleet_file.read_text()
        assert cli.main(["fleet", "discover", "--write", str(fleet_file), "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["new"] == [] and again["already_listed"] == [pty]
        assert fleet_file.read_text() == before

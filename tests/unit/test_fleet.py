"""Fleet file validation: each user error names the file, device and field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.config.fleet import DEFAULT_FLEET, QemuLink, SerialLink, SshLink, load_fleet, one_board_fleet
from bench.core.errors import ConfigError, ExitCode
from tests.conftest import REPO, fleet_refusal, hilbench


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


def test_bundled_virtual_fleet_loads() -> None:
    fleet = load_fleet(None)
    assert fleet.path == DEFAULT_FLEET
    kinds = [d.kind for d in fleet]
    assert kinds.count("esp32c6") == 2 and {"jetson-orin-nx", "pi5", "switch-arm64"} <= set(kinds)
    assert all(d.virtual for d in fleet)


def test_links_and_defaults(tmp_path: Path) -> None:
    fleet = load_fleet(
        write(
            tmp_path,
            """
[[device]]
name = "c6"
kind = "esp32c6"
port = "rfc2217://127.0.0.1:4000"
fps_target = 30
[[device]]
name = "pi"
kind = "pi5"
ssh = "bench@10.1.2.3"
key = "keys/id"
[[device]]
name = "sw"
kind = "switch-arm64"
[device.qemu]
image = "img"
timing = "icount"
""",
        )
    )
    c6, pi, sw = fleet.devices
    assert c6.link == SerialLink("rfc2217://127.0.0.1:4000", 921600)
    assert c6.settings.fps_target == 30 and c6.settings.decision_budget_ms == 100  # two periods at 20 FPS
    assert isinstance(pi.link, SshLink) and pi.link.port == 22 and pi.link.key == tmp_path / "keys" / "id"
    assert isinstance(sw.link, QemuLink) and sw.link.timing == "icount" and sw.link.image == tmp_path / "img"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[[device]]\nname = "a"\nkind = "esp33"\nport = "/dev/ttyUSB0"',
            "device 'a': field 'kind': unknown kind 'esp33'",
        ),
        ('[[device]]\nname = "a"\nport = "/dev/ttyUSB0"', "device 'a': field 'kind': missing"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"', "device 'a': missing link: field 'port'"),
        ('[[device]]\nname = "a"\nkind = "pi5"', "device 'a': missing link: field 'ssh'"),
        (
            '[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"\n[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"',
            "device 'a': field 'name': duplicate",
        ),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\nbaud = "fast"', "field 'baud': expected int"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\ncolour = 1', "device 'a': unknown field 'colour'"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\nssh = "u@h"', "reached by serial, not ssh"),
        ('[[device]]\nkind = "pi5"\nssh = "u@h"', "device #1: field 'name': missing"),
        ('[[device]]\nname = "a"\nkind = "pi5"\nssh = "nouser"', "field 'ssh': 'nouser' is not user@host"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "COM3"', "field 'port': 'COM3' is not a serial port"),
        ('[[device]]\nname = "a"\nkind = "switch-arm64"\n[device.qemu]\ntiming = "fast"', "field 'qemu.timing'"),
        ('[[device]]\nname = "a"\nkind = "switch-arm64"\n[device.qemu]\nsmp = 0', "'qemu.smp': 0 is out of range"),
        ('[[device]]\nname = "a"\nkind = "switch-arm64"\n[device.qemu]\ncolour = 1', "'qemu.colour': not a field"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\nbaud = 9', "field 'baud': 9 is out of range"),
        ('[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"\nkey = 1', "field 'key': expected str, got int"),
        ('[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"\npython = "py; rm"', "'python': 'py; rm' is not a path"),
        ('[[device]]\nname = "a"\nkind = "web"\ndevtools = "http://x"', "field 'devtools': 'http://x' is not a ws://"),
        ("[devices]\nx = 1", "unknown top-level key(s) devices"),
        ('[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"\ntags = [1]', "field 'tags': expected an array of str"),
        ("[[device]\n", "not valid TOML"),
        ('[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\nusb = "cdc"', "field 'usb': unknown value 'cdc'"),
    ],
)
def test_validation_errors_name_file_device_and_field(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in fleet_refusal(write(tmp_path, text))


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_fleet(tmp_path / "nope.toml")


def test_cli_reports_config_error_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, '[[device]]\nname = "a"\nkind = "esp33"\nport = "/dev/x"')
    proc = subprocess.run(hilbench("fleet", "list", "--fleet", str(path)), cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == ExitCode.USAGE
    assert "unknown kind 'esp33'" in proc.stderr and "Traceback" not in proc.stderr


def test_selection_by_kind_tag_and_name() -> None:
    fleet = load_fleet(None)
    assert [d.name for d in fleet.select(kinds=["esp32c6"])] == ["c6-a", "c6-b"]
    assert [d.name for d in fleet.select(tags=["linux"])] == ["orin-1", "pi5-1"]
    with pytest.raises(ConfigError, match="no device named 'zz'"):
        fleet.select(names=["zz"])
    with pytest.raises(ConfigError, match="unknown kind"):
        fleet.select(kinds=["toaster"])


def test_settings_are_typed_frozen_and_defaulted_once_per_kind(tmp_path: Path) -> None:
    import dataclasses

    from bench.config.kinds import KINDS

    fleet = load_fleet(
        write(
            tmp_path,
            '[[device]]\nname = "a"\nkind = "pi5"\nssh = "u@h"\nmodel_version = 3\n'
            '[[device]]\nname = "c"\nkind = "esp32c6"\nport = "/dev/x"\n',
        )
    )
    pi, c6 = fleet.devices
    assert pi.settings.model_version == 3 and pi.settings.model_format == KINDS["pi5"].model_format == "tflite-int8"
    assert c6.settings.model_format == KINDS["esp32c6"].model_format == "npcm-int8"
    with pytest.raises(dataclasses.FrozenInstanceError):
        pi.settings.fps_target = 1  # type: ignore[misc]
    assert pi.with_settings(fps_target=5).settings.fps_target == 5 and pi.settings.fps_target == 30


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("chip_id", "13", "device 'a': unknown field 'chip_id'"),
        ("model_version", '"2"', "device 'a': field 'model_version': expected int, got str"),
        ("wire_speed", "1", "device 'a': field 'wire_speed': expected bool, got int"),
        ("fps_target", "0", r"device 'a': field 'fps_target': 0 is out of range \(must be 1 to 1000\)"),
        ("flash_size", "-5", "device 'a': field 'flash_size': -5 is out of range"),
    ],
)
def test_settings_fields_are_checked(tmp_path: Path, field: str, value: str, expected: str) -> None:
    path = write(tmp_path, f'[[device]]\nname = "a"\nkind = "esp32c6"\nport = "/dev/x"\n{field} = {value}\n')
    with pytest.raises(ConfigError, match=expected):
        load_fleet(path)


def test_web_devices_are_reached_by_a_browser_and_choose_their_update_channel(tmp_path: Path) -> None:
    from bench.links.browser import BrowserLink

    fleet = load_fleet(
        write(
            tmp_path,
            '[[device]]\nname = "w"\nkind = "web"\ndevtools = "ws://127.0.0.1:9222/devtools/browser/x"\n'
            '[[device]]\nname = "p"\nkind = "pi5"\nssh = "u@h"\nupdate_channel = "grpc"\n',
        )
    )
    web, pi = fleet.devices
    assert isinstance(web.link, BrowserLink) and web.link.devtools.endswith("/browser/x")
    assert web.settings.update_channel == "websocket" and pi.settings.update_channel == "grpc"
    assert load_fleet(None).select(kinds=["web"])[0].virtual  # the bundled fleet has one, started by the bench


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('kind = "web"', "missing link: field 'devtools'"),
        ('kind = "web"\ndevtools = "http://h:9222"', "is not a ws:// DevTools URL"),
        ('kind = "pi5"\nssh = "u@h"\nupdate_channel = "carrier-pigeon"', "field 'update_channel'"),
        ('kind = "web"\nport = "/dev/x"\nvirtual = true', "web devices are reached by browser, not serial"),
    ],
)
def test_web_and_channel_mistakes_name_the_field(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_fleet(write(tmp_path, f'[[device]]\nname = "a"\n{body}\n'))


def test_a_teams_model_and_firmware_paths_are_taken_from_the_fleet_files_folder(tmp_path: Path, monkeypatch) -> None:
    lab = tmp_path / "lab"
    lab.mkdir()
    fleet_file = lab / "fleet.toml"
    fleet_file.write_text(
        '[[device]]\nname = "c6"\nkind = "esp32c6"\nport = "rfc2217://127.0.0.1:4000"\n'
        'model = "models/ours.tflite"\nfirmware = "fw/micropython.bin"\n'
        '[[device]]\nname = "pi"\nkind = "pi5"\nssh = "bench@10.1.2.3"\nmodel = "npc-policy-int8"\n'
    )
    monkeypatch.chdir(tmp_path)  # started from elsewhere: the paths still point next to the fleet file
    c6, pi = load_fleet(fleet_file).devices
    assert c6.settings.model == str(lab / "models" / "ours.tflite")
    assert c6.settings.firmware == str(lab / "fw" / "micropython.bin")
    assert pi.settings.model == "npc-policy-int8"  # a bundled fixture's name stays a name


@pytest.mark.parametrize(("port", "usb"), [("/dev/ttyACM0", "usb-serial-jtag"), ("/dev/ttyUSB0", "uart-bridge")])
def test_one_board_on_a_cdc_acm_port_is_its_chips_usb_serial_jtag(port: str, usb: str) -> None:
    (board,) = one_board_fleet(port)
    assert board.name == "board" and board.link == SerialLink(port, board.settings.baud)
    assert board.settings.usb == usb

"""Lab configuration without a coordinator: fleet [lab] validation, exporter YAML, place plans, links from
resources, job identities, and the PostgreSQL translation of the store's SQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.config.fleet import SerialLink, SshLink, load_fleet
from bench.core.errors import ConfigError, DeviceUnreachable, ExitCode
from bench.core.identity import holder_gone, job_identity
from bench.lab.client import LabResource
from bench.lab.exporter import exporter_config
from bench.lab.links import link_from_resources
from bench.lab.sync import desired_places
from bench.store.dialect import PostgresConnection, postgres_ddl
from tests.conftest import REPO, fleet_refusal

LAB = """
[bench]
name = "Lab-1"
[lab]
coordinator = "lab-server:20408"

[[device]]
name = "c6-real"
kind = "esp32c6"
place = "desk1-c6"
lab_host = "bench-a"
usb_serial = "F4:12:FA:00:11:22"
lab_tags = { board = "esp32c6", desk = "d1" }

[[device]]
name = "c6-virt"
kind = "esp32c6"
virtual = true
place = "virt-c6"
lab_host = "bench-a"

[[device]]
name = "orin"
kind = "jetson-orin-nx"
place = "orin-1"
lab_host = "bench-b"
ssh = "nvidia@10.0.0.7:22"
key = "keys/orin"
host_key = "ssh-ed25519 AAAAC3Nza"

[[device]]
name = "any-c6"
kind = "esp32c6"
lab_tags = { board = "esp32c6" }
"""


def fleet_file(tmp_path: Path, text: str = LAB) -> Path:
    path = tmp_path / "lab.toml"
    path.write_text(text)
    return path


def test_lab_devices_have_no_link_until_acquired(tmp_path: Path) -> None:
    fleet = load_fleet(fleet_file(tmp_path))
    assert (fleet.lab.coordinator, fleet.lab.acquire_timeout_s) == ("lab-server:20408", 60.0)
    orin = fleet.get("orin")
    assert orin.link is None and orin.lab is not None and orin.lab.place == "orin-1"
    assert isinstance(orin.lab.local, SshLink) and orin.lab.local.key == (tmp_path / "keys/orin").resolve()
    assert fleet.get("any-c6").lab.place is None and fleet.get("any-c6").lab.tags == {"board": "esp32c6"}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ('coordinator = "lab-server:20408"', 'coordinator = "lab-server"'),
            r"field 'lab.coordinator'.*HOST:PORT",
        ),
        (('[lab]\ncoordinator = "lab-server:20408"', ""), r"device 'c6-real': field 'place'/'lab_tags' needs"),
        (('lab_host = "bench-b"', ""), r"device 'orin': field 'lab_host': missing"),
        (('desk = "d1"', 'Desk = "d1"'), r"device 'c6-real': field 'lab_tags': Desk = 'd1' is not a labgrid tag"),
        (('place = "virt-c6"', 'place = "desk1-c6"'), r"place 'desk1-c6' is given to more than one device"),
        (('usb_serial = "F4:12:FA:00:11:22"', 'port = "/dev/ttyACM0"'), r"device 'c6-real': field 'port': a device in"),
        (("[lab]", "[lab]\nwait = 3"), r"field 'lab.wait': not a field of \[lab\]"),
    ],
)
def test_lab_fields_are_validated_naming_file_device_and_field(tmp_path: Path, edit: tuple, message: str) -> None:
    assert re.search(message, fleet_refusal(fleet_file(tmp_path, LAB.replace(*edit, 1))))


def test_exporter_config_per_bench_host(tmp_path: Path) -> None:
    fleet = load_fleet(fleet_file(tmp_path))
    served = {"c6-virt": SerialLink("rfc2217://127.0.0.1:40123", 921600)}
    text = exporter_config(fleet, "bench-a", served, address="10.0.0.2")
    assert all(line.startswith("##") for line in text.splitlines() if line.startswith("#"))  # Jinja2: `#` = statement
    assert yaml.safe_load(text) == {
        "c6-real": {"USBSerialPort": {"match": {"ID_SERIAL_SHORT": "F4:12:FA:00:11:22"}, "speed": 921600}},
        "c6-virt": {"NetworkSerialPort": {"host": "10.0.0.2", "port": 40123, "speed": 921600, "protocol": "rfc2217"}},
    }
    assert yaml.safe_load(exporter_config(fleet, "bench-b")) == {
        "orin": {"NetworkService": {"address": "10.0.0.7", "username": "nvidia", "port": 22}}
    }
    with pytest.raises(ConfigError, match="device 'c6-virt': virtual, so its port is known only while it runs"):
        exporter_config(fleet, "bench-a")
    with pytest.raises(ConfigError, match="no device has lab_host = 'bench-z'"):
        exporter_config(fleet, "bench-z")


def test_places_planned_from_the_fleet(tmp_path: Path) -> None:
    places = desired_places(load_fleet(fleet_file(tmp_path)))
    assert set(places) == {"desk1-c6", "virt-c6", "orin-1"}  # a tags-only device reserves, it has no place
    assert places["desk1-c6"].matches == frozenset({"bench-a/c6-real/*"})
    assert places["desk1-c6"].tags == {"board": "esp32c6", "desk": "d1", "hb_fleet": "lab_1"}


def test_links_from_a_place_resources(tmp_path: Path) -> None:
    fleet = load_fleet(fleet_file(tmp_path))
    serial = LabResource("bench-a", "c6-real", "NetworkSerialPort", "RawSerialPort",
                      {"host": "bench-a.lab", "port": 51234, "speed": 115200, "protocol": "rfc2217"}, True)  # fmt: skip
    link = link_from_resources(fleet.get("c6-real"), "desk1-c6", [serial])
    assert link == SerialLink("rfc2217://bench-a.lab:51234?ign_set_control", 115200)
    ssh = LabResource("bench-b", "orin", "NetworkService", "NetworkService",
                   {"address": "10.0.0.7", "username": "nvidia", "port": 2222}, True)  # fmt: skip
    link = link_from_resources(fleet.get("orin"), "orin-1", [ssh])
    assert isinstance(link, SshLink) and (link.user, link.host, link.port) == ("nvidia", "10.0.0.7", 2222)
    assert link.host_key == "ssh-ed25519 AAAAC3Nza" and link.key == (tmp_path / "keys/orin").resolve()
    with pytest.raises(DeviceUnreachable, match="place 'orin-1' has no NetworkService"):
        link_from_resources(fleet.get("orin"), "orin-1", [serial])


def test_job_identities_tell_a_gone_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_USERNAME", raising=False)
    monkeypatch.setenv("LG_HOSTNAME", "bench-a")
    host, user = job_identity()
    assert host == "bench-a" and user.startswith("hb.") and f".{os.getpid()}." in user
    assert holder_gone(f"{host}/{user}") is False  # this process: alive
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert holder_gone(f"bench-a/hb.ci.{int(dead.stdout)}.12345") is True
    assert holder_gone(f"bench-b/{user}") is None  # another host: cannot tell
    assert holder_gone("bench-a/ci-job-17") is None  # not a bench identity
    monkeypatch.setenv("LG_USERNAME", "ci-job-18")
    assert job_identity() == ("bench-a", "ci-job-18")


def test_postgres_translation_of_the_store_sql() -> None:
    ddl = postgres_ddl("CREATE TABLE runs (id INTEGER PRIMARY KEY, t_ns INTEGER NOT NULL, speed REAL)")
    assert ddl == (
        "CREATE TABLE runs (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, t_ns BIGINT NOT NULL,"
        " speed DOUBLE PRECISION)"
    )
    conn = PostgresConnection.__new__(PostgresConnection)
    conn._upserts = {"clock": " ON CONFLICT (run_id, device) DO UPDATE SET offset_ns = EXCLUDED.offset_ns"}
    assert conn.translate("INSERT OR REPLACE INTO clock VALUES (?,?,?)") == (
        "INSERT INTO clock VALUES (%s,%s,%s) ON CONFLICT (run_id, device) DO UPDATE SET offset_ns = EXCLUDED.offset_ns"
    )
    assert conn.translate("INSERT OR IGNORE INTO meta (key) VALUES (?)") == (
        "INSERT INTO meta (key) VALUES (%s) ON CONFLICT DO NOTHING"
    )
    assert conn.translate("SELECT 1 WHERE name LIKE '5%' AND id = ?") == "SELECT 1 WHERE name LIKE '5%%' AND id = %s"


def test_the_serial_module_is_plain_pyserial() -> None:
    """labgrid's pyserial-labgrid and esptool's pyserial both install `serial`; the bench chose pyserial 3.5
    (docs/lab.md): install with `pip install --force-reinstall --no-deps pyserial==3.5` last."""
    import serial

    assert serial.__version__ == "3.5"


def test_cli_errors_name_the_device_or_the_coordinator(tmp_path: Path) -> None:
    path = fleet_file(tmp_path, LAB.replace("lab-server:20408", "127.0.0.1:1"))  # nothing listens on port 1
    env = {**os.environ, "COLUMNS": "200"}

    def hilbench(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "bench", *args, "--fleet", str(path)]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=60)

    config = hilbench("lab", "exporter-config", "--host", "bench-a")
    assert config.returncode == ExitCode.USAGE and "device 'c6-virt': virtual" in config.stderr
    sync = hilbench("lab", "sync")
    assert sync.returncode == ExitCode.UNREACHABLE and "labgrid coordinator 127.0.0.1:1: not reachable" in sync.stderr
    assert "Traceback" not in sync.stderr
    listed = hilbench("fleet", "list", "--json")
    assert listed.returncode == 0 and "labgrid place desk1-c6 on bench-a" in listed.stdout

"""`hilbench linux check|pin` against a board written in a fleet file as a real one would be
(ssh = "user@host:port", key, pinned host_key), served by a virtual Pi 5's sshd."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.core.errors import ExitCode
from bench.links.ssh import free_local_port
from tests.conftest import REPO, hilbench
from tests.linux_support import RunningBoard, virtual_board

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def pi() -> Iterator[RunningBoard]:
    with virtual_board("pi5") as running:
        yield running


def fleet_file(tmp_path: Path, board: RunningBoard, **overrides: object) -> Path:
    link = board.device.link
    fields = {
        "name": "lab-pi",
        "kind": "pi5",
        "ssh": f"{link.user}@{link.host}:{link.port}",
        "key": str(link.key),
        "host_key": link.host_key,
        **overrides,
    }
    body = "[[device]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in fields.items() if v is not None)
    path = tmp_path / "fleet.toml"
    path.write_text(body)
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(hilbench(*args), cwd=REPO, capture_output=True, text=True, timeout=120)


def test_check_a_pinned_board(pi: RunningBoard, tmp_path: Path) -> None:
    proc = run("linux", "check", "--fleet", str(fleet_file(tmp_path, pi)), "--json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    row = json.loads(proc.stdout)["devices"][0]
    assert row["name"] == "lab-pi" and row["status"] == "ok" and row["runtime"].startswith("ai-edge-litert")


def test_unreachable_board_exits_3_naming_it(pi: RunningBoard, tmp_path: Path) -> None:
    fleet = fleet_file(tmp_path, pi, ssh=f"root@127.0.0.1:{free_local_port()}")
    proc = run("linux", "check", "--fleet", str(fleet), "--json")
    assert proc.returncode == ExitCode.UNREACHABLE
    row = json.loads(proc.stdout)["devices"][0]
    assert row["status"] == "unreachable" and "device 'lab-pi'" in row["detail"]


def test_pin_prints_the_boards_host_key(pi: RunningBoard, tmp_path: Path) -> None:
    proc = run("linux", "pin", "--fleet", str(fleet_file(tmp_path, pi, host_key=None)))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert f'host_key = "{pi.device.link.host_key}"' in proc.stdout
    assert "SHA256:" in proc.stdout


def test_flash_of_an_unreachable_board_exits_3_naming_it(pi: RunningBoard, tmp_path: Path) -> None:
    fleet = fleet_file(tmp_path, pi, ssh=f"root@127.0.0.1:{free_local_port()}")
    proc = run("flash", "--fleet", str(fleet), "--attempts", "1", "--logs", str(tmp_path / "logs"), "--json")
    assert proc.returncode == ExitCode.UNREACHABLE
    row = json.loads(proc.stdout)["devices"][0]
    assert row["unreachable"] and "device 'lab-pi'" in row["reason"]


def test_flash_of_a_pinned_board_deploys_then_finds_it_up_to_date(pi: RunningBoard, tmp_path: Path) -> None:
    fleet = str(fleet_file(tmp_path, pi, agent_dir=f"agents/{tmp_path.name}"))  # a folder no other test used
    first = run("flash", "--fleet", fleet, "--logs", str(tmp_path / "logs1"), "--json")
    second = run("flash", "--fleet", fleet, "--logs", str(tmp_path / "logs2"), "--json")
    assert first.returncode == second.returncode == ExitCode.OK, first.stderr + second.stderr
    deploy1 = json.loads(first.stdout)["devices"][0]["steps"][-1]
    deploy2 = json.loads(second.stdout)["devices"][0]["steps"][-1]
    assert deploy1["step"] == "deploy" and deploy1["figures"]["files_sent"] > 5
    assert deploy2["skipped"] and deploy2["figures"]["files_sent"] == 0 and json.loads(second.stdout)["ok"]

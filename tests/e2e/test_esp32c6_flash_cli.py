"""`hilbench flash` on the bundled fleet's two virtual ESP32-C6 boards, and the driver's agent link."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.bundles import micropython_bundle
from bench.devices.esp32c6 import Esp32c6Driver
from bench.fleet import load_fleet
from tests.conftest import hilbench
from tests.esp32c6_support import FIRMWARE, REPO, esptool, mpremote, virtual_c6

pytestmark = pytest.mark.e2e


def test_hilbench_flash_two_board_fleet(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "HILBENCH_STATE_DIR": str(state)}
    argv = hilbench("flash", "--device", "c6-a", "--device", "c6-b", "--json", "--logs", str(tmp_path / "logs"))
    first = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    report = json.loads(first.stdout)
    assert report["ok"] and [d["name"] for d in report["devices"]] == ["c6-a", "c6-b"]
    fleet = load_fleet()
    for entry in report["devices"]:
        assert entry["ok"] and not entry["up_to_date"]
        assert entry["steps"][0]["detail"].startswith(f"ESP32-C6 {fleet.get(entry['name']).extra['mac']}")
        board_fs = state / entry["name"] / "fs"
        for source, dest in micropython_bundle(fleet.get(entry["name"])):
            got = hashlib.sha256((board_fs / dest).read_bytes()).hexdigest()
            assert got == hashlib.sha256(source.read_bytes()).hexdigest(), dest
        assert (state / entry["name"] / "flash.bin").read_bytes()[: FIRMWARE.stat().st_size] == FIRMWARE.read_bytes()
        assert (tmp_path / "logs" / f"{entry['name']}.log").is_file()
    again = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert all(d["up_to_date"] for d in json.loads(again.stdout)["devices"])


ECHO_AGENT = """import sys
def run():
    sys.stdout.write("agent up\\n")
    while True:
        line = sys.stdin.readline()
        sys.stdout.write("echo " + line)
"""


def test_driver_opens_and_closes_the_agent_over_the_serial_link(tmp_path: Path) -> None:
    """open_agent() starts `npc_agent.run()` from the raw REPL and hands over the same connection."""
    with virtual_c6(tmp_path / "state", name="c6-agent") as board:
        flashed = esptool("--port", board.urls["rfc2217"], "write-flash", "0x0", str(FIRMWARE))
        assert flashed.returncode == 0, flashed.stdout + flashed.stderr
        board.wait_mode("app")
        agent_src = tmp_path / "npc_agent.py"
        agent_src.write_text(ECHO_AGENT)  # a stand-in agent module: the test is about the link
        assert mpremote("connect", board.urls["rfc2217"], "fs", "cp", str(agent_src), ":npc_agent.py").returncode == 0
        driver = Esp32c6Driver(board.device)

        async def session() -> list[bytes]:
            transport = await driver.open_agent()
            lines = [await asyncio.wait_for(transport.readline(), 10)]
            await transport.send(b"~ping\n")
            lines.append(await asyncio.wait_for(transport.readline(), 10))
            await driver.close_agent()
            return lines

        assert asyncio.run(session()) == [b"agent up\n", b"echo ~ping\n"]
        after = mpremote("connect", board.urls["rfc2217"], "exec", "print('back at the REPL')")
        assert after.returncode == 0 and after.stdout.strip() == "back at the REPL"

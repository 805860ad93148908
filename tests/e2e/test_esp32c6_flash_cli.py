"""`hilbench flash` on the bundled fleet's two virtual ESP32-C6 boards, and the driver's agent link."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from bench.agent import wire
from bench.bundles import micropython_bundle
from bench.config.fleet import load_fleet
from bench.devices.esp32c6 import Esp32c6Driver
from tests.conftest import hilbench
from tests.esp32c6_support import FIRMWARE, REPO, mpremote, preflash, virtual_c6

pytestmark = pytest.mark.e2e


@pytest.mark.slow  # opt-in (--run-slow): the nightly e2e and the lab test flash boards through the same command
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
        assert entry["steps"][0]["detail"].startswith(f"ESP32-C6 {fleet.get(entry['name']).mac}")
        board_fs = state / entry["name"] / "fs"
        for source, dest in micropython_bundle(fleet.get(entry["name"]), tmp_path / f"bundle-{entry['name']}"):
            got = hashlib.sha256((board_fs / dest).read_bytes()).hexdigest()
            assert got == hashlib.sha256(source.read_bytes()).hexdigest(), dest
        assert (state / entry["name"] / "flash.bin").read_bytes()[: FIRMWARE.stat().st_size] == FIRMWARE.read_bytes()
        assert (tmp_path / "logs" / f"{entry['name']}.log").is_file()
    again = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    for entry in json.loads(again.stdout)["devices"]:
        assert entry["up_to_date"], entry  # firmware MD5 and every file's sha256 already match
        assert entry["steps"][0]["detail"].endswith("up to date")


@pytest.mark.slow  # opt-in (--run-slow): the nightly e2e flashes a board and talks to its agent by default
def test_driver_flashes_then_talks_to_the_micropython_agent(tmp_path: Path) -> None:
    """flash() then open_agent(): `npc_agent.run()` from the raw REPL answers protocol lines on the same link."""
    with virtual_c6(tmp_path / "state", name="c6-a") as board:
        driver = Esp32c6Driver(board.device, log_dir=tmp_path / "logs")
        bundle = micropython_bundle(board.device, tmp_path / "bundle")
        model = next(src for src, dest in bundle if dest.startswith("models/") and dest.endswith(".npcm"))

        async def session() -> dict:
            steps = await driver.flash()
            assert [(s.step, s.ok) for s in steps] == [("firmware", True), ("agent", True)], steps
            transport = await driver.open_agent()
            try:
                await transport.send(wire.encode({"t": "hello", "id": 1}))
                while True:
                    line = await asyncio.wait_for(transport.readline(), 20)
                    if wire.is_message(line) and wire.decode(line).get("id") == 1:
                        return wire.decode(line)
            finally:
                await driver.close_agent()

        hello = asyncio.run(session())
        assert hello["t"] == "hello" and hello["proto"] == 1 and hello["agent"] == "npc-mpy"
        assert hello["model"]["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
        after = mpremote("connect", board.urls["rfc2217"], "exec", "print('back at the REPL')")
        assert after.returncode == 0 and after.stdout.strip() == "back at the REPL"


def test_hilbench_flash_over_a_link_without_modem_lines(tmp_path: Path) -> None:
    """socket:// has no DTR/RTS: the driver asks MicroPython for the bootloader, and reboots from the stub."""
    from make_virtual_firmware import build

    image = tmp_path / "other.bin"
    image.write_bytes(build(banner="MicroPython v1.29.0; ESP32C6 (second build)"))
    with virtual_c6(preflash(tmp_path / "state", FIRMWARE.read_bytes()), name="c6-sock") as board:
        assert board.wait_mode("app")["mode"] == "app"
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(f'[[device]]\nname = "c6-sock"\nkind = "esp32c6"\nport = "{board.urls["socket"]}"\n')
        argv = hilbench("flash", "--fleet", str(fleet), "--firmware", str(image), "--json", "--logs", str(tmp_path))
        for expect_written in (True, False):
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
            [entry] = json.loads(done.stdout)["devices"]
            assert entry["steps"][0]["skipped"] is not expect_written
            assert board.wait_mode("app")["mode"] == "app"
        assert "(second build)" in board.control("log")["log"]
        assert "machine.bootloader()" in (tmp_path / "c6-sock.log").read_text()

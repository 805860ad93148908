"""Fault cases of ESP32-C6 flashing: wrong-chip image, blank flash, a board losing power mid-write."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import serial

from bench.devices.esp_image import build_image
from tests.esp32c6_support import REPO, Board, virtual_c6

pytestmark = pytest.mark.e2e
FIRMWARE = REPO / "firmware" / "esp32c6" / "host-clock-vm.bin"  # fleet paths are the fleet file's: absolute
from make_virtual_firmware import build  # noqa: E402


def fleet_file(path: Path, boards: list[Board]) -> Path:
    """A fleet of the running boards as ordinary serial devices (the bench does not start them itself)."""
    lines = []
    for board in boards:
        lines += [
            "[[device]]",
            f'name = "{board.device.name}"',
            'kind = "esp32c6"',
            f'port = "{board.urls["rfc2217"]}"',
        ]
        lines += [f'mac = "{board.device.mac}"', f'firmware = "{FIRMWARE}"', ""]
    path.write_text("\n".join(lines))
    return path


def ask_for_raw_repl(url: str) -> bytes:
    """What the board answers, within a second, to mpremote's "interrupt, enter raw REPL"."""
    port = serial.serial_for_url(url, timeout=1.0)
    try:
        port.write(b"\r\x03\r\x01")
        return port.read(4096)
    finally:
        port.close()


def hilbench_flash(fleet: Path, logs: Path, *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "bench", "flash", "--fleet", str(fleet), "--logs", str(logs), "--json", *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout_s: float = 180) -> tuple[int, dict]:
    stdout, stderr = proc.communicate(timeout=timeout_s)
    assert stdout.strip(), stderr
    return proc.returncode, {d["name"]: d for d in json.loads(stdout)["devices"]}


def test_wrong_chip_image_is_refused_before_touching_the_board(tmp_path: Path) -> None:
    s3_image = tmp_path / "esp32s3.bin"
    s3_image.write_bytes(build_image([(0x40370000, b"\x00" * 64)], entry=0x40370000, chip_id=9))
    with virtual_c6(tmp_path / "state", name="c6-wrong") as board:
        before = board.control("status")["events"]
        code, result = finish(hilbench_flash(fleet_file(tmp_path / "fleet.toml", [board]), tmp_path / "logs",
                                             "--firmware", str(s3_image)))  # fmt: skip
        assert code == 2  # bad input refused before the board is touched (docs/robustness.md)
        assert "refused" in result["c6-wrong"]["reason"] and "ESP32-S3" in result["c6-wrong"]["reason"]
        assert result["c6-wrong"]["attempts"] == 1  # bad input is not retried
        assert board.control("status")["events"] == before  # no reset, no download mode: untouched


@pytest.mark.slow  # opt-in (--run-slow): a board killed mid-write, above, is flashed back by default
def test_blank_flash_boot_loops_until_flashed(tmp_path: Path) -> None:
    with virtual_c6(tmp_path / "state", name="c6-blank") as board:
        assert board.wait_mode("boot-loop")["mode"] == "boot-loop"
        deadline = time.monotonic() + 10
        while board.control("log")["log"].count("invalid header: 0xffffffff") < 2:  # it loops, once a second
            assert time.monotonic() < deadline, board.control("log")["log"]
            time.sleep(0.2)
        assert b"raw REPL" not in ask_for_raw_repl(board.urls["socket"])  # no MicroPython without firmware
        code, result = finish(hilbench_flash(fleet_file(tmp_path / "fleet.toml", [board]), tmp_path / "logs"))
        assert code == 0, result
        assert board.wait_mode("app")["mode"] == "app"


def test_board_killed_mid_write_fails_alone_and_is_recovered_next_run(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(build(pad=300_000))  # 0.3 MB: seconds on a 921600-baud wire
    with (
        virtual_c6(tmp_path / "a", name="c6-victim", mac="60:55:f9:c6:30:01", wire_speed=True) as victim,
        virtual_c6(tmp_path / "b", name="c6-healthy", mac="60:55:f9:c6:30:02", wire_speed=True) as healthy,
    ):
        fleet = fleet_file(tmp_path / "fleet.toml", [victim, healthy])
        proc = hilbench_flash(fleet, tmp_path / "logs1", "--firmware", str(big), "--attempts", "2")
        deadline = time.monotonic() + 60
        while not any("flash begin" in e for e in victim.control("status")["events"]):
            assert time.monotonic() < deadline and proc.poll() is None, "flashing never started"
            time.sleep(0.2)
        time.sleep(0.5)  # the write takes ~2 s on the simulated wire
        victim.kill()
        code, result = finish(proc)
        assert code == 3  # a flash that failed on the wire is an infrastructure failure (bench.core.outcomes)
        assert result["c6-healthy"]["ok"] and not result["c6-healthy"]["up_to_date"]
        assert not result["c6-victim"]["ok"] and result["c6-victim"]["attempts"] == 2
        assert result["c6-victim"]["reason"]
        assert "attempt 2/2" in (tmp_path / "logs1" / "c6-victim.log").read_text()

        victim.restart()  # power back: the half-written image does not boot
        assert victim.wait_mode("boot-loop")["mode"] == "boot-loop"
        fleet = fleet_file(tmp_path / "fleet.toml", [victim, healthy])
        code, result = finish(hilbench_flash(fleet, tmp_path / "logs2", "--firmware", str(big)))
        assert code == 0, result
        assert not result["c6-victim"]["steps"][0]["skipped"]  # the half-written image is written again
        assert result["c6-healthy"]["up_to_date"]
        assert victim.wait_mode("app")["mode"] == "app"

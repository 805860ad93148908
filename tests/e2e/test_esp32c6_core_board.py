"""The virtual ESP32-C6 running the counted firmware: esptool writes the image built from the firmware's ELF (by
esptool's own elf2image), the board boots it in qemu-system-riscv32 -icount, and mpremote talks to the firmware's
own REPL through the board's ports. Resets stop QEMU; nothing is left behind."""

from __future__ import annotations

import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ppk2_api.ppk2_api import PPK2_API

from bench.bundles.c6_firmware import build_firmware, image_for
from bench.devices.esp_image import parse_image
from bench.virtual.esp32c6.core_image import runs_on_core
from bench.virtual.esp32c6.supply import ACTIVE_UA, IDLE_UA
from tests.esp32c6_support import Board, esptool, mpremote, qemu_pids, virtual_c6

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
MAC = "60:55:f9:c6:20:01"


@pytest.fixture(scope="module")
def image() -> Path:
    return image_for(build_firmware().elf)


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, image: Path):
    """The board flashed with the counted image by esptool over socket:// (strapped into download mode from the
    bench, then reset): 1 s, where rfc2217:// takes ~24 s (pyserial's RFC 2217 client renegotiates the port on
    each of esptool's timeout changes). The auto-reset over rfc2217:// is test_esp32c6_esptool's
    test_flash_over_rfc2217_resets_into_micropython."""
    with virtual_c6(tmp_path_factory.mktemp("c6core"), mac=MAC) as running:
        running.control("download")
        write = esptool("--port", running.urls["socket"], "write-flash", "0x0", str(image))
        assert write.returncode == 0, write.stdout + write.stderr
        assert "Hash of data verified" in write.stdout
        running.control("boot")
        yield running


def test_the_image_is_the_elf_segments(image: Path) -> None:
    """esptool's elf2image image checks as a C6 image, and it is recognised as one for the counted core."""
    info = parse_image(image.read_bytes(), chip_id=13, chip_revision=1)
    assert runs_on_core(info)
    committed = Path(__file__).resolve().parents[2] / "firmware" / "esp32c6" / "host-clock-vm.bin"
    assert not runs_on_core(parse_image(committed.read_bytes()))


def test_flashed_firmware_runs_on_the_counted_core(board: Board) -> None:
    """After the reset the board runs the flashed firmware in QEMU: the firmware's own REPL answers."""
    status = board.wait_mode("app", timeout_s=30)
    assert "app started (counted core)" in status["events"]
    ran = mpremote(
        "connect", board.urls["socket"], "exec", "import sys; print(sys.platform, sys.implementation._build)"
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.split() == ["esp32", "ESP32_GENERIC_C6"]  # the unix-port VM says "linux"
    [pid] = qemu_pids(board.virtual.state_dir)
    # a counted core runs at the host's lowest CPU priority: contention stretches only its wall time
    assert os.getpriority(os.PRIO_PROCESS, pid) == 19


def test_raw_paste_and_soft_reset_pass_through(board: Board, tmp_path: Path) -> None:
    """A program longer than raw-paste's window runs whole; variables are gone after a soft reset."""
    program = tmp_path / "long.py"
    program.write_text("total = 0\n" + "".join(f"total += {i}  # {'x' * 40}\n" for i in range(200)) + "print(total)\n")
    run = mpremote("connect", board.urls["socket"], "run", str(program))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == str(sum(range(200)))
    kept = mpremote("connect", board.urls["socket"], "resume", "exec", "print(total)")
    assert kept.stdout.strip() == str(sum(range(200))), kept.stdout + kept.stderr
    gone = mpremote("connect", board.urls["socket"], "soft-reset", "resume", "exec", "print('total' in globals())")
    assert gone.stdout.strip().endswith("False"), gone.stdout + gone.stderr


def test_reset_and_download_mode_stop_qemu(board: Board) -> None:
    """Held in reset or in the ROM loader the core does not run: its QEMU is gone; a reset boots a new one."""
    board.control("download")
    assert board.wait_mode("download")["mode"] == "download"
    assert qemu_pids(board.virtual.state_dir) == []
    chip = esptool("--port", board.urls["socket"], "--before", "no-reset", "--after", "no-reset", "chip-id")
    assert chip.returncode == 0 and "ESP32-C6" in chip.stdout, chip.stdout + chip.stderr
    board.control("boot")
    board.wait_mode("app")
    ran = mpremote("connect", board.urls["socket"], "exec", "print(6 * 7)")
    assert ran.stdout.strip() == "42", ran.stdout + ran.stderr
    assert len(qemu_pids(board.virtual.state_dir)) == 1
    board.control("hold_reset")
    assert board.wait_mode("reset")["mode"] == "reset"
    assert qemu_pids(board.virtual.state_dir) == []
    board.control("power_cycle")
    assert board.wait_mode("app")["mode"] == "app"


def test_the_supply_follows_the_counted_busy_time(board: Board) -> None:
    """The virtual PPK2's samples on the counted core are the chip's counted clock: a loop that keeps the core busy
    for 0.4 s of counted time is 40 000 samples (10 us each) at the datasheet's CPU-running current (38 mA), however
    long the host took for it, and the REPL's waits around it are at the CPU-idle (WAITI) figure (27 mA)."""
    board.control("boot")
    board.wait_mode("app")
    ppk = PPK2_API(board.urls["ppk2"], timeout=1, write_timeout=1)
    assert ppk.get_modifiers()
    ppk.use_source_meter()
    ppk.set_source_voltage(3300)
    ppk.toggle_DUT_power("ON")
    time.sleep(0.5)
    ppk.start_measuring()
    raw = b""
    # the sleep idles the core between compiling the program (how long depends on how the raw REPL's input came in)
    # and the loop, so the loop is a busy stretch of its own
    code = "import time\ntime.sleep_ms(20)\nt = time.ticks_us()\n"
    code += "while time.ticks_diff(time.ticks_us(), t) < 400000: pass"
    loop = subprocess.Popen([sys.executable, "-m", "mpremote", "connect", board.urls["socket"], "exec", code])
    while loop.poll() is None:
        raw += ppk.get_data()
        time.sleep(0.0005)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:  # the REPL's wait after it: the run before it is streamed once it has ended
        raw += ppk.get_data()
        time.sleep(0.0005)
    ppk.stop_measuring()
    samples, _logic = ppk.get_samples(raw)
    del ppk
    assert loop.returncode == 0
    middle = (IDLE_UA + ACTIVE_UA) / 2
    runs = [(high, len(list(group))) for high, group in itertools.groupby(s > middle for s in samples)]
    longest = max(n for high, n in runs if high)
    assert 40_000 <= longest <= 40_000 * 1.05  # the loop, and the few instructions around it
    start = next(i for i, (high, n) in enumerate(runs) if high and n == longest)
    busy = samples[sum(n for _h, n in runs[:start]) :][:longest]
    assert statistics.fmean(busy) == pytest.approx(ACTIVE_UA, rel=0.005)
    assert statistics.fmean(s for s in samples if s < middle) == pytest.approx(IDLE_UA, rel=0.01)

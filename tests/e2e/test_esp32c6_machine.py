"""The `machine` module a program meets on the virtual ESP32-C6, through mpremote as on a real board: what the
esp32 port documents for the C6 works, wrong arguments raise its errors, what is not modelled is absent."""

from __future__ import annotations

import json
import time

import pytest

from tests.esp32c6_support import MACHINE_BASE_PROGRAM, PROGRAM_START, Board, check_machine_base, mpremote, run_on

pytestmark = pytest.mark.e2e

SURFACE = (
    PROGRAM_START
    + r"""
out["freq"] = machine.freq()
machine.freq(80000000)
out["freq80"] = machine.freq()
out["freq_bad"] = err(lambda: machine.freq(100000000))
led = machine.Pin(8, machine.Pin.OUT, value=1)
out["out"] = [led.value(), (led.off(), led.value())[1], (led.on(), led())[1]]
out["in_pull_up"] = machine.Pin(9, machine.Pin.IN, machine.Pin.PULL_UP).value()
out["in_pull_down"] = machine.Pin(4, machine.Pin.IN, machine.Pin.PULL_DOWN).value()
out["flash_pin"] = err(lambda: machine.Pin(26))
out["no_pin"] = err(lambda: machine.Pin(31))
out["i2c"] = err(lambda: machine.I2C(0))
out["deepsleep"] = err(lambda: machine.deepsleep(1000))
out["absent"] = [n for n in ("mem32", "disable_irq") if hasattr(machine, n)]
print(json.dumps(out))
"""
)


def test_machine_surface_behaves_as_the_esp32_port(c6_board: Board) -> None:
    out = json.loads(run_on(c6_board, SURFACE, "rfc2217"))
    assert out["freq"] == 160_000_000 and out["freq80"] == 80_000_000
    assert out["freq_bad"].startswith("ValueError: frequency must be")
    assert out["out"] == [1, 0, 1]
    assert (out["in_pull_up"], out["in_pull_down"]) == (1, 0)
    assert out["flash_pin"] == out["no_pin"] == "ValueError: invalid pin"
    assert out["i2c"].startswith("AttributeError") and out["deepsleep"].startswith("AttributeError")
    assert out["absent"] == []


def test_uart_timer_watchdog_signal_and_sleep_behave_as_on_the_counted_firmware(c6_board: Board) -> None:
    """The part of `machine` the VM shares with the counted firmware (test_esp32c6_counted runs it there)."""
    check_machine_base(run_on(c6_board, MACHINE_BASE_PROGRAM, "rfc2217"))


def test_unfed_watchdog_resets_the_board(c6_board: Board) -> None:
    (c6_board.fs_dir / "boot.py").write_text(
        "import machine\nopen('cause.txt', 'w').write(str(machine.reset_cause()))\n"
    )
    try:
        start = len(c6_board.control("log")["log"])
        run_on(c6_board, "import machine; machine.WDT(timeout=300)", "rfc2217")
        deadline = time.monotonic() + 15
        log = ""
        while ">>> " not in log.partition("Rebooting...")[2] and time.monotonic() < deadline:
            time.sleep(0.2)
            log = c6_board.control("log")["log"][start:]
        assert "task_wdt: Task watchdog got triggered" in log, log
        assert "rst:0xc (SW_CPU),boot:0x6c (SPI_FAST_FLASH_BOOT)" in log.partition("Rebooting...")[2], log
        assert (c6_board.fs_dir / "cause.txt").read_text() == "3"  # machine.WDT_RESET, as boot.py saw it
    finally:
        (c6_board.fs_dir / "boot.py").unlink()


def test_a_fed_watchdog_keeps_the_board_running(c6_board: Board) -> None:
    """Fed every 100 ms for 0.8 s, a 400 ms watchdog never fires while the program runs."""
    feed = (
        "import machine, time\nw = machine.WDT(timeout=400)\nfor _ in range(8):\n    time.sleep_ms(100)\n    w.feed()\n"
    )
    run = mpremote("connect", c6_board.urls["rfc2217"], "exec", feed + "print('alive')")
    assert run.returncode == 0 and run.stdout.strip() == "alive", run.stdout + run.stderr

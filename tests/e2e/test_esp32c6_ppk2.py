"""The real ppk2-api, unchanged, against the virtual ESP32-C6's virtual PPK2: metadata, source-meter mode and
voltage, start/stop, measurement frames; the current it decodes is what the virtual board says it drew."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import pytest
from ppk2_api.ppk2_api import PPK2_API

from tests.esp32c6_support import Board

pytestmark = pytest.mark.e2e


def _measure(ppk: PPK2_API, seconds: float) -> list[float]:
    """Samples (uA) of `seconds` of measuring, read as ppk2-api's own fetch thread does (a pty hands out at most
    4 KiB per read, so the reader polls often), and drained after the stop."""
    ppk.start_measuring()
    raw = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        raw += ppk.get_data()
        time.sleep(0.0005)
    ppk.stop_measuring()
    quiet = time.monotonic() + 0.3
    while time.monotonic() < quiet:
        if chunk := ppk.get_data():
            raw += chunk
            quiet = time.monotonic() + 0.3
        time.sleep(0.0005)
    samples, _logic = ppk.get_samples(raw)
    return samples


def test_ppk2_api_reads_the_board_current(c6_board: Board) -> None:
    ppk = PPK2_API(c6_board.urls["ppk2"], timeout=1, write_timeout=1)
    assert ppk.get_modifiers(), "ppk2-api found no PPK2 metadata"
    assert ppk.modifiers["HW"] is not None
    ppk.use_source_meter()
    ppk.set_source_voltage(3300)
    ppk.toggle_DUT_power("ON")
    time.sleep(0.2)
    assert c6_board.control("ppk2")["vdd_mv"] == 3300

    idle = _measure(ppk, 1.0)
    idle_drawn = c6_board.control("ppk2")["window"]
    busy = _measure_during_busy(ppk, c6_board)
    busy_drawn = c6_board.control("ppk2")["window"]
    del ppk

    for samples, drawn in ((idle, idle_drawn), (busy, busy_drawn)):
        assert len(samples) >= 0.9 * drawn["seconds"] * 100_000, "samples lost between the meter and ppk2-api"
        mean = statistics.fmean(samples)
        assert mean == pytest.approx(drawn["mean_ua"], rel=0.01)
    assert statistics.fmean(busy) > statistics.fmean(idle) * 1.05, "a busy VM must draw more than an idle one"


def _measure_during_busy(ppk: PPK2_API, c6_board: Board) -> list[float]:
    """Measure while the board runs a 4 s busy loop (started in the background through its socket port): the VM
    takes CPU time, the chip runs instead of idling."""
    code = "import time\nt=time.ticks_ms()\nwhile time.ticks_diff(time.ticks_ms(), t) < 4000: pass"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpremote", "connect", c6_board.urls["socket"], "exec", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)  # mpremote connects and enters the raw REPL
        return _measure(ppk, 2.0)
    finally:
        proc.wait(timeout=60)

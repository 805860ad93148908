"""Energy per decision on the counted virtual ESP32-C6, measured as a lab does with a PPK2: the firmware drives a
GPIO high around each piece of work, the PPK2's logic input D0 is wired to it, and the bench's own PPK2 path (the
ppk2-api reader, bins ending at D0's edges, energy_figures) integrates each high run. The meter's timeline is the
chip's counted clock, so the same work draws the same energy on every run, whatever the host does meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from bench.bundles.c6_firmware import build_firmware, image_for
from bench.config.kinds import COUNTED
from bench.energy.ppk2 import Ppk2Meter
from bench.energy.spec import EnergySpec, Ppk2Settings
from bench.measure.energy import MARKER, EnergyFigures, energy_figures
from bench.measure.records import OffsetClock
from bench.virtual.esp32c6.supply import ACTIVE_UA
from tests.esp32c6_support import Board, preflash, run_on, virtual_c6

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.programs("riscv64-unknown-elf-gcc", "picolibc.specs", "make", "qemu-system-riscv32"),
]
SPEC = EnergySpec("ppk2", Ppk2Settings(logic_channel=0))
MARKER_GPIO = 6
DECISIONS = 12
WORK = """
import time
from machine import Pin
marker = Pin({gpio}, Pin.OUT, value=0)
def work(n):
    s = 0
    for i in range(n):
        s += i * 3
    return s
for k in range({decisions}):
    marker.on(); work({n}); marker.off()
    time.sleep_ms(10)
"""


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    """A counted board whose PPK2 has D0 wired to GPIO6."""
    image = image_for(build_firmware().elf)
    state = preflash(tmp_path_factory.mktemp("c6marker"), image.read_bytes())
    with virtual_c6(state, mac="60:55:f9:c6:40:01", energy=SPEC, marker_gpio=MARKER_GPIO, firmware=COUNTED) as b:
        assert b.wait_mode("app", timeout_s=30)["mode"] == "app"
        yield b


def measure(board: Board, n: int) -> EnergyFigures:
    """Energy figures of DECISIONS marked runs of `work(n)`, through the bench's PPK2 meter."""

    async def run() -> EnergyFigures:
        meter = Ppk2Meter("c6-t", SPEC.with_port(board.urls["ppk2"]))
        await meter.start()
        try:
            await meter.first_sample()
            await asyncio.to_thread(run_on, board, WORK.format(gpio=MARKER_GPIO, decisions=DECISIONS, n=n))
            await asyncio.sleep(0.3)  # the REPL's idle after the last decision streams the last low edge
        finally:
            samples = await meter.stop()
        return energy_figures(samples, [], OffsetClock(0), meter.name, meter.period_s, meter.marker)

    return board.loop.run(run(), timeout_s=120)


def test_the_same_work_draws_the_same_energy_and_more_work_draws_more(board: Board) -> None:
    first, again, heavier = measure(board, 1500), measure(board, 1500), measure(board, 3000)
    for fig in (first, again, heavier):
        assert MARKER in fig.flags and fig.marker == "PPK2 D0", fig.flags
        assert fig.decisions == DECISIONS
        assert fig.inferring_mw == pytest.approx(ACTIVE_UA * 3.3 / 1000, rel=1e-3)  # the core ran all along
        assert fig.idle_mw is not None and fig.idle_mw < fig.inferring_mw  # the sleeps between idled
    assert again.p50_mj == pytest.approx(first.p50_mj, rel=0.01)
    assert heavier.p50_mj > 1.8 * first.p50_mj
    print(f"\nenergy per decision, counted: {first.p50_mj:.4f} / {again.p50_mj:.4f} mJ, twice the work "
          f"{heavier.p50_mj:.4f} mJ")  # fmt: skip

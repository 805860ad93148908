"""The clock column of a device's energy rows says what the meter's readings were stamped with, and that a virtual
board's figure is modelled: a guest's PMIC or INA3221 readings on its own clock read "guest clock (icount): the
meter's readings; modelled", not the bench's clock."""

from __future__ import annotations

from bench.measure.device import ON_DEVICE_CLOCK
from bench.report.measures import DEVICE_METER_CLOCK, METER_CLOCK, MODELLED_NOTE, measure_rows
from bench.results.clocks import GUEST_TIMING

VIRTUAL_PMIC = f"vcgencmd pmic_read_adc (sum of PMIC rails; modelled from counted time and ...); {ON_DEVICE_CLOCK}"


def _energy_clocks(meter: str) -> set[str]:
    device = {"summary": {}, "icount": True, "verdicts": [], "meter": meter, "timing": GUEST_TIMING}
    return {r["clock"] for r in measure_rows(device) if r["key"].startswith("energy")}


def test_a_virtual_guests_meter_on_its_own_clock_reads_guest_clock_and_modelled() -> None:
    assert _energy_clocks(VIRTUAL_PMIC) == {DEVICE_METER_CLOCK + MODELLED_NOTE}


def test_a_real_meter_stamped_by_the_bench_reads_bench_and_not_modelled() -> None:
    assert _energy_clocks("a USB-C meter on the console's supply, one sample per 100 ms") == {METER_CLOCK}

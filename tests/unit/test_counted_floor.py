"""Figures counted in instructions are judged on `icount_threshold_pct` (0.5%), not the floor of a timed figure, and a
busy bench host does not make them inconclusive: inference time on an icount clock, and energy per decision from
the inference marker on the virtual ESP32-C6's counted core (its meter's samples are that core's counted clock)."""

from __future__ import annotations

import pytest

from bench.measure.energy import DEVICE_CLOCK, MARKER
from bench.measure.measurement import Measurement
from bench.results.judge import counted, judge_run
from bench.results.thresholds import load_thresholds
from bench.results.verdict import INCONCLUSIVE, SUSPECTED, UNCHANGED
from bench.store.results import ResultStore, open_store

COUNTED_C6 = {"virtual": True, "clock": "icount", "latency_clock": "device",
              "platform": "micropython-esp32/qemu-icount"}  # fmt: skip
GUEST = {"virtual": True, "clock": "icount", "latency_clock": "device", "platform": "linux-aarch64/qemu-icount"}
UNIX_VM = {"virtual": True, "clock": "realtime", "latency_clock": "device", "platform": "micropython-linux"}
QUIET = {"host": "vm", "cores": 2, "seconds": 40.0, "busy_pct": 30.0, "bench_pct": 25.0, "others_pct": 5.0,
         "steal_pct": 0.0, "load_start": 1.0, "load_end": 1.0}  # fmt: skip
BUSY = {**QUIET, "busy_pct": 95.0, "others_pct": 70.0, "load_start": 8.0, "load_end": 8.0}
# five unchanged nights of the counted C6 (measured spread: inference P50 CV 0.48%, energy per decision 0.47%)
INFERENCE_US = (13_850.0, 13_790.0, 13_920.0, 13_860.0, 13_830.0)
ENERGY_MJ = (1.7270, 1.7195, 1.7355, 1.7280, 1.7245)


def stored_night(store: ResultStore, device: str, kind: str, measurements: list[Measurement], fingerprint: dict,
                 host: dict = QUIET) -> int:  # fmt: skip
    """A stored, passed replay of `device` with its measurements, fingerprint and host noise, accepted into later
    windows."""
    run = store.runs.begin_run("replay", session="combat")
    store.runs.add_device(run, device, kind)
    store.measures.add_measurements(run, device, measurements)
    store.runs.update_device(run, device, status="ok")
    store.runs.finish_run(run, "ok")
    store.verdicts.record_fingerprint(run, device, fingerprint)
    store.verdicts.record_host(run, host)
    store.windows.accept(run, device, True)
    return run


def night(store: ResultStore, fingerprint: dict, inference_us: float, energy_mj: float, *, marker: bool = True,
          host: dict = QUIET) -> int:  # fmt: skip
    """A stored replay of c6-a with its fingerprint and host noise, accepted into later windows."""
    flags = (MARKER,) if marker else ()
    return stored_night(store, "c6-a", "esp32c6", [
        Measurement("inference_latency_p50", "us", inference_us, samples=620),
        Measurement("energy_per_decision_p50", "mJ", energy_mj, samples=620, flags=flags),
    ], fingerprint, host)  # fmt: skip


def verdicts_of(tmp_path, fingerprint: dict, grow: float, *, marker: bool = True, host: dict = QUIET) -> dict:
    """metric -> verdict of a night `grow` times the baseline's inference time and energy, after five nights."""
    with open_store(tmp_path / "r.sqlite") as store:
        for us, mj in zip(INFERENCE_US, ENERGY_MJ, strict=True):
            night(store, fingerprint, us, mj, marker=marker)
        run = night(store, fingerprint, 13_850.0 * grow, 1.7270 * grow, marker=marker, host=host)
        return {v.metric: v for v in judge_run(store, run, load_thresholds())}


def test_a_three_percent_slower_model_on_the_counted_c6_is_suspected_on_time_and_energy(tmp_path) -> None:
    found = verdicts_of(tmp_path, COUNTED_C6, 1.03)
    for metric in ("inference_p50", "energy_per_decision"):
        assert found[metric].status == SUSPECTED, found[metric].reason
        assert found[metric].threshold_pct == 0.5


def test_the_same_change_is_under_the_timed_floor_where_energy_is_not_counted(tmp_path) -> None:
    """A guest's meter samples on the bench clock, the unix-port VM runs in the host's time, and energy windows
    mapped from frames are not the counted marker: all keep the 10% floor."""
    guest = verdicts_of(tmp_path / "guest", GUEST, 1.03)
    assert guest["inference_p50"].status == SUSPECTED
    assert guest["energy_per_decision"].status == UNCHANGED and guest["energy_per_decision"].threshold_pct == 10
    vm = verdicts_of(tmp_path / "vm", UNIX_VM, 1.03)
    assert vm["inference_p50"].status == UNCHANGED and vm["inference_p50"].threshold_pct == 10
    no_marker = verdicts_of(tmp_path / "frames", COUNTED_C6, 1.03, marker=False)
    assert no_marker["energy_per_decision"].threshold_pct == 10


def test_an_unchanged_night_on_the_counted_c6_stays_unchanged(tmp_path) -> None:
    found = verdicts_of(tmp_path, COUNTED_C6, 1.002)
    assert found["inference_p50"].status == UNCHANGED and found["energy_per_decision"].status == UNCHANGED


@pytest.mark.parametrize(("fingerprint", "status"), [(COUNTED_C6, SUSPECTED), (UNIX_VM, INCONCLUSIVE)])
def test_a_busy_host_leaves_counted_energy_judged(tmp_path, fingerprint: dict, status: str) -> None:
    found = verdicts_of(tmp_path, fingerprint, 1.5, host=BUSY)
    assert found["energy_per_decision"].status == status


def test_only_compute_and_marked_decision_energy_are_counted() -> None:
    """Frame jitter and mean power follow the host even on a counted core (an idle core's clock runs in real time)."""
    rules = {r.name: r for r in load_thresholds().rules}
    assert counted(rules["inference_p50"], GUEST) and counted(rules["inference_p50"], COUNTED_C6)
    assert counted(rules["energy_per_decision"], COUNTED_C6, (MARKER,))
    assert not counted(rules["energy_per_decision"], COUNTED_C6)
    assert not counted(rules["energy_per_decision"], GUEST, (MARKER,))
    assert not counted(rules["power_mean"], COUNTED_C6, (MARKER,))
    assert not counted(rules["jitter_std"], COUNTED_C6) and not counted(rules["fps"], GUEST)
    assert not counted(rules["inference_p50"], UNIX_VM)


def test_a_guests_energy_on_its_own_counted_clock_takes_the_counted_floor() -> None:
    """The PMIC's and the INA3221's stand-ins on an icount guest: power from counted busy time, read on the guest's
    clock (DEVICE_CLOCK). Its mean power, which idle time in the host's real time moves, keeps the timed floor."""
    rules = {r.measurement: r for r in load_thresholds().rules}
    energy, power = rules["energy_per_decision_p50"], rules["power_mean"]
    assert counted(energy, GUEST, (DEVICE_CLOCK,)) and not counted(energy, GUEST, ())
    assert not counted(power, GUEST, (DEVICE_CLOCK,))
    assert not counted(energy, {**GUEST, "clock": "realtime"}, (DEVICE_CLOCK,))  # a real board's clock is not counted

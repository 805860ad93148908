"""A night that played fewer decisions than a coarse meter's energy figure is taken over (the session's first
ACTIVE_DECISIONS) gives that figure over a shorter stretch of the session: it is flagged, and its verdict is
inconclusive, never a regression, an improvement or a baseline run."""

from __future__ import annotations

import pytest

from bench.agent.frame import Frame
from bench.measure.device import DeviceMeasurements, add_energy
from bench.measure.energy import ACTIVE, ACTIVE_DECISIONS, DEVICE_CLOCK, SHORT, energy_figures
from bench.measure.measurement import Measurement
from bench.measure.records import OffsetClock
from bench.results.judge import acceptance, judge_run
from bench.results.thresholds import load_thresholds
from bench.results.verdict import INCONCLUSIVE, SUSPECTED, UNCHANGED
from bench.store.results import ResultStore, open_store
from tests.unit.test_counted_floor import GUEST, stored_night
from tests.unit.test_energy import _samples

FULL_NIGHTS_MJ = (3.0545, 3.0544, 3.0604, 3.0474, 3.0598)  # pi5-1's full nights (benchmarks.md), CV 0.18%


def decisions(count: int) -> list[Frame]:
    """`count` decisions 30 a second, 2 ms each, from 2 s into the samples below (device clock, us)."""
    start_us = 102_000_000
    return [Frame(i=k, vsync=k, ran=True, t0=start_us + k * 33_333, t1=start_us + k * 33_333 + 2_000)
            for k in range(count)]  # fmt: skip


def test_a_run_with_too_few_decisions_flags_its_active_energy() -> None:
    samples = _samples([1600.0] * 8 + [1700.0] * 40 + [1600.0] * 4, start_ns=100_000_000_000, dt_ns=250_000_000)
    full = energy_figures(samples, decisions(300), OffsetClock(0), "pmic", 0.25, device_clock=True)
    assert ACTIVE in full.flags and SHORT not in full.flags and full.decisions == ACTIVE_DECISIONS
    short = energy_figures(samples, decisions(195), OffsetClock(0), "pmic", 0.25, device_clock=True)
    assert ACTIVE in short.flags and SHORT in short.flags and short.decisions == 195
    out = DeviceMeasurements()
    add_energy(out, short)
    m = out.get("energy_per_decision_p50")
    assert SHORT in m.flags and m.value == pytest.approx(short.p50_mj, abs=1e-4)
    assert f"too few decisions: 195 of the {ACTIVE_DECISIONS}" in m.description


def night(store: ResultStore, energy_mj: float, decided: int = ACTIVE_DECISIONS) -> int:
    """A stored replay of pi5-1 (icount guest, its PMIC on the device's clock) that played `decided` decisions."""
    flags = (ACTIVE, DEVICE_CLOCK) + ((SHORT,) if decided < ACTIVE_DECISIONS else ())
    return stored_night(store, "pi5-1", "pi5", [
        Measurement("energy_per_decision_p50", "mJ", energy_mj, samples=decided, flags=flags),
        Measurement("power_mean", "mW", 1687.0, samples=1),
    ], GUEST)  # fmt: skip


@pytest.mark.parametrize(("grow", "decided", "status"), [
    (1.03, ACTIVE_DECISIONS, SUSPECTED),  # a full night 3% worse: the counted floor (0.5%) catches it
    (1.03, 195, INCONCLUSIVE),  # the same figure over 195 decisions: another stretch, no confident verdict
    (0.994, 204, INCONCLUSIVE),  # a short night's lower figure is no improvement either
    (1.0, ACTIVE_DECISIONS, UNCHANGED),
])  # fmt: skip
def test_a_short_night_is_inconclusive_on_energy(tmp_path, grow: float, decided: int, status: str) -> None:
    with open_store(tmp_path / "r.sqlite") as store:
        for mj in FULL_NIGHTS_MJ:
            night(store, mj)
        run = night(store, 3.0553 * grow, decided)
        verdicts = judge_run(store, run, load_thresholds())
    (energy,) = [v for v in verdicts if v.metric == "energy_per_decision"]
    assert energy.status == status, energy.reason
    if status == INCONCLUSIVE:
        assert energy.reason.startswith(f"inconclusive: too few decisions ({decided} of the {ACTIVE_DECISIONS}")
        joins, why = acceptance(verdicts, "pi5-1", "ok")
        assert not joins and "energy_per_decision" in why  # its figure is of another stretch: not a baseline run

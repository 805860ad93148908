"""Energy: decisions stay within the device's `energy_budget_mj` (fleet file; P99 of energy per decision, the median
over the same short replays as the timing tests), measured by its power meter; and the meter reads a non-zero
power while the agent runs."""

from __future__ import annotations

import time

import pytest


def test_decision_energy_within_budget(agent, replayed, record_measurement):
    energy = agent.device.energy
    if energy is None or energy.budget_mj is None:
        pytest.skip(f"device {agent.name}: no energy_budget_mj in the fleet file")
    p50 = [r.values.get("energy_per_decision_p50") for r in replayed.runs]
    if any(v is None for v in p50):
        pytest.skip(f"device {agent.name}: its meter ({energy.driver}) gives no energy per decision (too slow, or "
                    "it failed: see the run's report)")  # fmt: skip
    record_measurement("energy_per_decision_p50", replayed.median("energy_per_decision_p50"), "mJ",
                       samples=replayed.each("energy_per_decision_p50"))  # fmt: skip
    # the P99 (median over the windows), not every decision: a meter coarser than one inference attributes each
    # decision's energy from the span around it, and a stall or a burst of other work in one span is no decision.
    # A meter too coarse even for that (a PMIC, an INA3221 read over SSH) gives the decisions' active energy over
    # their number, their mean: the figure the budget then holds
    single = all(r.values.get("energy_per_decision_p99") is not None for r in replayed.runs)
    name = "energy_per_decision_p99" if single else "energy_per_decision_p50"
    over = sum(v for r in replayed.runs if (v := r.values.get("energy_budget_exceeded")) is not None)
    figure = replayed.median(name)
    record_measurement("energy_budget_exceeded", over, "count")
    what = "P99" if single else "(active energy over decisions)"
    # decisions draw something: a meter that misses the agent's work (a virtual board's rails not counting its
    # agent's cgroup, docs/lab-control.md) would give the idle power back, nothing per decision
    assert figure > 0, f"device {agent.name}: energy per decision {what} {figure:.3f} mJ: the meter saw no work"
    assert figure <= energy.budget_mj, (
        f"device {agent.name}: energy per decision {what} {figure:.3f} mJ is over the budget of "
        f"{energy.budget_mj:g} mJ (P50 {replayed.median('energy_per_decision_p50'):.3f} mJ; {over:g} decision(s) "
        "over it)"
    )


def test_meter_reads_the_running_device(agent, power_meter, record_measurement):
    with power_meter.measure() as reading:
        time.sleep(1.0)
    record_measurement("power_mean", reading.mean_mw, "mW")
    record_measurement("energy_1s", reading)
    assert reading.samples, f"device {agent.name}: no meter samples in 1 s"
    assert reading.mean_mw > 0, f"device {agent.name}: the meter read no power from a running device"

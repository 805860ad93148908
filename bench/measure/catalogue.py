"""The metric catalogue: one entry per stored figure, the one place its unit, clock, title and rule are written.

`bench.measure.device` stores each figure under its entry's name and unit, with the entry's rule as its
description; the report, the verdicts' titles, `--json` and the tests read the stored figures through
`metric(name)` and never compute them again. How a figure is computed lives next to the code computing
it: percentiles in `bench.measure.histogram` (HdrHistogram, value at percentile), frame timing and the
stutter rule in `bench.measure.frames`, decision latency in `bench.measure.latency`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.measure.energy import SLOW_RULE
from bench.measure.frames import STUTTER_RULE
from bench.measure.histogram import DISTRIBUTION_KEYS

COMPUTE = "inference_latency"  # the histogram of spans that are compute alone (t0..t1): an icount guest counts them
BENCH = "bench"  # measured on the bench's clock: meaningless on a guest whose clock is virtual (icount)
DEVICE = "device"  # measured on the device's clock
NO_CLOCK = ""  # a size or a count of events


@dataclass(frozen=True)
class Metric:
    """One stored figure: its name and unit in the store, the clock it is on, its title and how it is computed.

    `histogram` names the stored HDR histogram it is read from ("" when none); `percentile` which statistic of
    that histogram it is (None for a figure that is not a percentile)."""

    name: str
    unit: str
    clock: str
    title: str
    rule: str
    histogram: str = ""
    percentile: float | None = None


def _distribution(hist: str, unit: str, clock: str, title: str, rule: str, p50: str = "") -> list[Metric]:
    """The P50/P90/P95/P99/max entries of the stored histogram `hist` (`p50`: the median's own title)."""
    out = []
    for key, pct in DISTRIBUTION_KEYS.items():
        label = p50 if key == "p50" and p50 else f"{title} {'max' if key == 'max' else f'P{key[1:]}'}"
        out.append(Metric(f"{hist}_{key}", unit, clock, label, rule, hist, pct))
    return out


ENERGY_RULE = (
    f"meter energy over each high run of the inference marker on the meter's logic input, else over each inference"
    f" window t0..t1 mapped to the bench clock (or attributed from the span around it, bench/measure/energy.py);"
    f" n/a when {SLOW_RULE}"
)
# the figures a power meter gives (a device without an `energy` table in its fleet entry has none of them)
_METERED = [
    Metric("energy_per_decision_p50", "mJ", BENCH, "energy per decision P50 (mJ/decision)", ENERGY_RULE),
    Metric("energy_per_decision_p99", "mJ", BENCH, "energy per decision P99", ENERGY_RULE),
    Metric("energy_per_decision_mean", "mJ", BENCH, "energy per decision (mean)", ENERGY_RULE),
    Metric("power_inferring", "mW", BENCH, "mean power while inferring",
           "meter energy in the decisions' windows / their time"),
    Metric("power_idle", "mW", BENCH, "mean power while idle",
           "meter energy outside the decisions' windows / time outside"),
    Metric("energy_session", "mJ", BENCH, "energy per session", "meter energy over the measured run"),
    Metric("power_mean", "mW", BENCH, "mean power", "meter energy over the measured run / its length"),
    Metric("energy_budget_exceeded", "count", BENCH, "decisions over the energy budget",
           "decisions whose energy exceeded the device's energy_budget_mj"),
]  # fmt: skip
_ENTRIES = [
    *_distribution("decision_latency", "us", BENCH, "decision latency",
                   "input sent -> decision (t1 on the bench clock)"),
    *_distribution(COMPUTE, "us", DEVICE, "inference time", "inference time t1 - t0 on the device clock",
                   "inference time P50 (device clock)"),
    *_distribution("first_frame", "us", BENCH, "first-frame time",
                   "cold start: model load request sent -> end of the first inference",
                   "first-frame time (median of cold starts)"),
    *_distribution("replay_send_error", "ns", BENCH, "replayer send error", "replayer: actual - scheduled send time"),
    *_distribution("replay_release_error", "ns", DEVICE, "replay release error",
                   "input reached an inference after the first one at or past its due time (device clock)"),
    Metric("replay_released_early", "count", DEVICE, "inputs released early", "inputs used before they were due"),
    Metric("replay_session", "s", NO_CLOCK, "session length", "the session's length"),
    Metric("replay_covered", "s", BENCH, "session played", "session time played from the start"),
    Metric("played_inputs_per_frame", "count", DEVICE, "inputs per inference",
           "inputs an inference had been given since the one before it (mean; device clock: bench.measure.played)"),
    Metric("played_inputs_per_frame_max", "count", DEVICE, "inputs per inference (max)",
           "the most inputs one inference had been given since the one before it (device clock)"),
    Metric("played_late", "count", DEVICE, "inputs held late", "inputs that reached the agent after their due time"),
    Metric("frames_scheduled", "count", NO_CLOCK, "frames scheduled",
           "display frames its schedule gives while the frame loop ran"),
    Metric("inferences_scheduled", "count", NO_CLOCK, "inferences scheduled",
           "inferences its schedule gives while the frame loop ran"),
    Metric("first_frame", "ms", BENCH, "first-frame time", "start request sent -> end of the first inference"),
    Metric("decision_deadline_misses", "count", BENCH, "deadline misses",
           "inputs decided later than the decision budget, or not at all"),
    Metric("decision_budget", "ms", NO_CLOCK, "decision budget", "the device's decision_budget_ms setting"),
    Metric("inputs_undecided", "count", BENCH, "inputs undecided", "inputs no inference used by the end of the run"),
    Metric("decision_clock_inconsistent", "count", BENCH, "decisions before their input",
           "decisions that mapped to before their input was sent (clock offset error)"),
    Metric("frames", "count", NO_CLOCK, "frames", "display frames reported"),
    Metric("inferences", "count", NO_CLOCK, "inferences", "frames whose inference ran"),
    Metric("fps", "FPS", DEVICE, "FPS (1 / mean frame time)", "1 / mean frame time", "frame_time"),
    Metric("fps_1pct_low", "FPS", DEVICE, "1% low FPS (1 / P99 frame time)", "1 / P99 frame time", "frame_time", 99.0),
    Metric("frame_jitter_std", "us", DEVICE, "frame jitter (std of t0 - due)", "std of t0 - due"),
    Metric("frame_jitter_p99", "us", DEVICE, "frame jitter P99 (of |t0 - due|)", "P99 of |t0 - due|",
           "frame_deviation", 99.0),
    Metric("stutters", "count", DEVICE, f"stutters ({STUTTER_RULE})", STUTTER_RULE),
    Metric("skipped_frames", "count", NO_CLOCK, "skipped frames", "frames the agent skipped (protocol.md)"),
    Metric("late_frames", "count", NO_CLOCK, "late frames", "frames the agent ran late (protocol.md)"),
    Metric("mem_peak", "B", NO_CLOCK, "memory peak (agent high-water mark)", "largest mem_peak of the agent's stats"),
    Metric("faults", "count", NO_CLOCK, "faults", "fault messages of the run"),
    Metric("rollback_time_max", "us", DEVICE, "longest rollback", "largest rollback_us of the run's faults"),
    Metric("inputs_sent", "count", BENCH, "inputs sent", "inputs the replayer sent"),
    *_METERED,
    Metric("input_bytes", "B", NO_CLOCK, "input bytes", "bytes of the inputs the replayer sent"),
]  # fmt: skip
# a stored histogram that has no percentile entries of its own (the report plots it)
HISTOGRAMS = {"frame_time": ("us", DEVICE), "frame_deviation": ("us", DEVICE)}

CATALOGUE: dict[str, Metric] = {m.name: m for m in _ENTRIES}
METERED = frozenset(m.name for m in _METERED)
FAULTS_PREFIX = "faults_"  # faults_<kind>: one count per fault kind seen


def metric(name: str) -> Metric:
    """The catalogue entry of the stored figure `name` (KeyError naming it when the catalogue has none)."""
    if name in CATALOGUE:
        return CATALOGUE[name]
    if name.startswith(FAULTS_PREFIX):
        kind = name.removeprefix(FAULTS_PREFIX)
        return Metric(name, "count", NO_CLOCK, f"{kind} faults", f"fault messages of kind {kind}")
    raise KeyError(f"{name!r} is not in the metric catalogue (bench/measure/catalogue.py)")

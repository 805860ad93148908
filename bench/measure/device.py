"""Everything measured on one device in one replay run, as typed measurements plus the histograms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.agent.frame import Frame
from bench.measure.catalogue import metric
from bench.measure.energy import ACTIVE, ACTIVE_DECISIONS, DEVICE_CLOCK, SHORT, EnergyFigures
from bench.measure.faults import FaultEvent, fault_counts, fault_event
from bench.measure.frames import frame_timing
from bench.measure.histogram import DISTRIBUTION_KEYS, Histogram
from bench.measure.latency import decision_latency, inference_latency
from bench.measure.measurement import Measurement
from bench.measure.records import DeviceClock
from bench.measure.replay_timing import CLOCK_LABELS, SEED_ALIGNMENT_MS, ReplayTiming, release_error
from bench.measure.samples import too_few_flags

ON_DEVICE_CLOCK = "on the device's clock"  # said of an energy figure whose readings and windows are both on it


@dataclass
class DeviceMeasurements:
    """Measurements, histograms and fault events of one device."""

    measurements: list[Measurement] = field(default_factory=list)
    histograms: list[Histogram] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)

    def add(self, name: str, value: float | None, **kw: Any) -> None:
        """Append the Measurement of catalogue entry `name`, in the entry's unit, described by its rule unless
        `description` says more."""
        entry = metric(name)
        kw.setdefault("description", entry.rule)
        self.measurements.append(Measurement(name, entry.unit, value, **kw))

    def add_distribution(self, hist: Histogram, description: str | None = None) -> None:
        """Keep `hist` and add its P50/P90/P95/P99/max as measurements (flagged when too few samples), described
        by the catalogue's rule unless `description` says more."""
        self.histograms.append(hist)
        s = hist.summary()
        for key in DISTRIBUTION_KEYS:
            name = f"{hist.name}_{key}"
            if metric(name).unit != hist.unit:
                raise ValueError(f"{hist.name} is in {hist.unit}; the catalogue stores {name} in {metric(name).unit}")
            flags = tuple(f for f in s.flags if f.endswith(f"_p{key[1:]}") or f == "no_samples")
            extra = {"description": description} if description else {}
            self.add(name, getattr(s, key), samples=s.count, flags=flags, **extra)

    def get(self, name: str) -> Measurement:
        """The measurement called `name` (KeyError if absent)."""
        for m in self.measurements:
            if m.name == name:
                return m
        raise KeyError(name)

    def values(self) -> dict[str, float | None]:
        """name -> value."""
        return {m.name: m.value for m in self.measurements}


def measure_device(
    frames: Sequence[Frame],
    *,
    clock: DeviceClock,
    budget_ms: float,
    timing: ReplayTiming,
    stats: Iterable[Mapping[str, Any]] = (),
    faults: Iterable[Mapping[str, Any]] = (),
    cold_starts_ms: Sequence[float] = (),
    energy: EnergyFigures | None = None,
    energy_budget_mj: float | None = None,
) -> DeviceMeasurements:
    """All metrics of one device from its frame records, its replay's input times (`timing`: bench send times, or
    due times on the device's own clock), its clock mapping (`clock`: fault times on the bench clock), `stats`
    and `fault` messages; the replay's fidelity and extent; the first-frame time of the session start; and the
    cold starts' first-frame times (`first_frame` histogram and `first_frame_p50`... measurements). Latency and
    first-frame figures are left out when `timing.clock` is None (no clock they would mean anything on). With `energy`
    (bench.measure.energy): energy per decision and mean power, judged against `energy_budget_mj`."""
    out = DeviceMeasurements()
    out.add_distribution(inference_latency(frames))
    if timing.clock is not None:
        _latency(out, frames, timing, budget_ms)
    if cold_starts_ms:
        cold = Histogram("first_frame", "us").record_all(round(v * 1000) for v in cold_starts_ms)
        where = CLOCK_LABELS.get(timing.clock or "", "")
        out.add_distribution(cold, f"cold start: model load request -> end of the first inference ({where})")
    _fidelity(out, frames, timing)
    ft = frame_timing(frames)
    out.histograms += [ft.frame_time, ft.deviation]
    out.add("frames", ft.frames)
    out.add("inferences", ft.inferences)
    out.add("fps", _r(ft.fps, 3), samples=ft.inferences)
    out.add("fps_1pct_low", _r(ft.low_1pct_fps, 3), samples=max(0, ft.inferences - 1),
            flags=_few(ft.inferences - 1, 99.0))  # fmt: skip
    out.add("frame_jitter_std", _r(ft.jitter_std_us, 1), samples=ft.inferences)
    out.add("frame_jitter_p99", ft.jitter_p99_us, samples=ft.inferences, flags=_few(ft.inferences, 99.0))
    out.add("stutters", ft.stutters, samples=ft.inferences)
    out.add("skipped_frames", ft.skipped)
    out.add("late_frames", ft.late)

    peaks = [s["mem_peak"] for s in stats if isinstance(s.get("mem_peak"), int | float)]
    out.add("mem_peak", max(peaks) if peaks else None, samples=len(peaks))

    out.faults = [fault_event(dict(f), clock) for f in faults]
    counts = fault_counts(out.faults)
    out.add("faults", len(out.faults))
    for kind in sorted(counts):
        out.add(f"faults_{kind}", counts[kind])
    rollbacks = [f.rollback_us for f in out.faults if f.rollback_us is not None]
    if rollbacks:
        out.add("rollback_time_max", max(rollbacks), samples=len(rollbacks))

    if energy is not None:
        add_energy(out, energy, energy_budget_mj)
    return out


def _latency(out: DeviceMeasurements, frames: Sequence[Frame], timing: ReplayTiming, budget_ms: float) -> None:
    """Decision latency, deadline misses and the session start's first-frame time, on `timing.clock`."""
    clock = timing.latency_clock
    decision = decision_latency(frames, timing.inputs_ns, clock, budget_ms, timing.end_ns)
    on_device = timing.clock == "device"
    out.add_distribution(
        decision.histogram, "input due -> decision (t1), both on the device clock" if on_device else None
    )
    out.add("decision_deadline_misses", decision.misses, samples=decision.decided + decision.undecided,
            description=f"inputs decided later than {budget_ms:g} ms, or not at all")  # fmt: skip
    out.add("decision_budget", budget_ms)
    out.add("inputs_undecided", decision.undecided)
    out.add("decision_clock_inconsistent", decision.clock_inconsistent)
    if timing.start_ns is not None:
        first = min((r for r in frames if r.ran and r.t1 is not None), key=lambda r: r.i, default=None)
        value = (clock.to_bench_ns(first.t1) - timing.start_ns) / 1e6 if first is not None else None
        out.add("first_frame", _r(value, 3),
                description=f"start request -> end of the first inference ({CLOCK_LABELS[timing.clock]})")  # fmt: skip


def _fidelity(out: DeviceMeasurements, frames: Sequence[Frame], timing: ReplayTiming) -> None:
    """How faithfully and how much of the session reached the device: the send error (bench clock) or release
    error (device clock) against the seed's alignment, the part of the session played, and the frames and
    inferences its schedule gives while the frame loop ran."""
    alignment = f"the seed aligns modalities within +-{SEED_ALIGNMENT_MS} ms"
    if timing.send_errors_ns is not None:
        hist = Histogram("replay_send_error", "ns").record_all(timing.send_errors_ns)
        out.add_distribution(hist, f"replayer: actual - scheduled send time (bench clock); {alignment}")
    if timing.clock == "device":
        released = release_error(frames, timing.inputs_ns)
        out.add_distribution(
            released.histogram, f"input reached an inference after the first one at or past its due time "
            f"(device clock); {alignment}",
        )  # fmt: skip
        out.add("replay_released_early", released.early)
    out.add("replay_session", round(timing.session_s, 3))
    if timing.covered_s is not None:
        where = CLOCK_LABELS.get(timing.clock or "", "bench clock")
        out.add("replay_covered", round(timing.covered_s, 3),
                description=f"session time played from the start ({where})"
                + ("; the device's time budget ended it" if timing.budget_hit else ""))  # fmt: skip
    if timing.loop_s is not None:
        out.add("frames_scheduled", round(timing.loop_s * timing.vsync_hz))
        out.add("inferences_scheduled", round(timing.loop_s * timing.fps))


def add_energy(out: DeviceMeasurements, fig: EnergyFigures, budget_mj: float | None = None) -> None:
    """The energy measurements of `fig`, each naming its meter (None with the meter's flags where it cannot
    resolve a decision)."""
    meter = f"meter: {fig.meter}, one sample per {fig.period_s * 1000:g} ms"
    if fig.marker is not None and fig.per_decision_mj:
        meter += f"; marker: {fig.marker}"
    if ACTIVE in fig.flags and fig.idle_mw is not None:
        meter += (f"; active energy over the first {fig.decisions} decisions: less the idle baseline "
                  f"{fig.idle_mw:.1f} mW (mean of the readings before them)")  # fmt: skip
    if SHORT in fig.flags:
        meter += f"; too few decisions: {fig.decisions} of the {ACTIVE_DECISIONS} the figure is taken over"
    if DEVICE_CLOCK in fig.flags:
        meter += f"; {ON_DEVICE_CLOCK}"
    n, flags = fig.decisions, fig.flags
    for name, value in (("energy_per_decision_p50", fig.p50_mj), ("energy_per_decision_p99", fig.p99_mj),
                        ("energy_per_decision_mean", fig.mean_mj)):  # fmt: skip
        own = tuple(f for f in flags if not f.startswith("too_few_samples_for_p") or name.endswith("p99"))
        out.add(name, _r(value, 4), samples=n, flags=own, description=f"{metric(name).rule}; {meter}")
    method = tuple(f for f in flags if not f.startswith("too_few_samples_for_p"))
    for name, value in (("power_inferring", fig.inferring_mw), ("power_idle", fig.idle_mw)):
        out.add(name, _r(value, 2), samples=n, flags=method, description=f"{metric(name).rule}; {meter}")
    span = f"{meter}; over {fig.span_s:.1f} s"
    out.add("energy_session", _r(fig.session_mj, 2), description=f"{metric('energy_session').rule}; {span}")
    out.add("power_mean", _r(fig.mean_mw, 2), description=f"{metric('power_mean').rule}; {span}")
    if budget_mj is not None and fig.per_decision_mj:
        over = sum(1 for e in fig.per_decision_mj if e > budget_mj)
        out.add("energy_budget_exceeded", over, samples=n,
                description=f"decisions over {budget_mj:g} mJ; {meter}")  # fmt: skip


def _r(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def _few(count: int, percentile: float) -> tuple[str, ...]:
    return too_few_flags(max(0, count), (percentile,))

"""Everything measured on one device in one replay run, as typed measurements plus the histograms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.measure.faults import FaultEvent, fault_counts, fault_event
from bench.measure.frames import frame_timing
from bench.measure.histogram import Histogram
from bench.measure.latency import decision_latency, inference_latency
from bench.measure.measurement import Measurement
from bench.measure.records import DeviceClock, FrameLike
from bench.measure.samples import too_few_flags


@dataclass
class DeviceMeasurements:
    """Measurements, histograms and fault events of one device."""

    measurements: list[Measurement] = field(default_factory=list)
    histograms: list[Histogram] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)

    def add(self, name: str, unit: str, value: float | None, **kw: Any) -> None:
        """Append one Measurement."""
        self.measurements.append(Measurement(name, unit, value, **kw))

    def add_distribution(self, hist: Histogram, description: str) -> None:
        """Keep `hist` and add its P50/P90/P95/P99/max as measurements (flagged when too few samples)."""
        self.histograms.append(hist)
        s = hist.summary()
        for key in ("p50", "p90", "p95", "p99", "max"):
            pct = f"p{key[1:]}"
            flags = tuple(f for f in s.flags if f.endswith(f"_{pct}") or f == "no_samples")
            self.add(
                f"{hist.name}_{key}", hist.unit, getattr(s, key), samples=s.count, flags=flags, description=description
            )

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
    frames: Sequence[FrameLike],
    *,
    sent_ns: Mapping[int, int],
    clock: DeviceClock,
    budget_ms: float,
    end_ns: int | None = None,
    stats: Iterable[Mapping[str, Any]] = (),
    faults: Iterable[Mapping[str, Any]] = (),
    send_errors_ns: Sequence[int] | None = None,
    start_ns: int | None = None,
    cold_starts_ms: Sequence[float] = (),
) -> DeviceMeasurements:
    """All metrics of one device from its frame records, the replayed inputs' send times (seq -> ns),
    its clock mapping, `stats` messages and `fault` messages; plus the replayer's send errors and, with
    `start_ns` (bench time the frame loop was started), the first-frame time of the session start; and the
    cold starts' first-frame times (`first_frame` histogram and `first_frame_p50`... measurements)."""
    out = DeviceMeasurements()
    out.add_distribution(inference_latency(frames), "inference time t1 - t0 on the device clock")
    decision = decision_latency(frames, sent_ns, clock, budget_ms, end_ns)
    out.add_distribution(decision.histogram, "input sent -> decision (t1 on the bench clock)")
    out.add("decision_deadline_misses", "count", decision.misses, samples=decision.decided + decision.undecided,
            description=f"inputs decided later than {budget_ms:g} ms, or not at all")  # fmt: skip
    out.add("decision_budget", "ms", budget_ms)
    out.add("inputs_undecided", "count", decision.undecided)
    out.add("decision_clock_inconsistent", "count", decision.clock_inconsistent,
            description="decisions that mapped to before their input was sent (clock offset error)")  # fmt: skip

    first = min((r for r in frames if r.ran and r.t1 is not None), key=lambda r: r.i, default=None)
    if start_ns is not None:
        value = (clock.to_bench_ns(first.t1) - start_ns) / 1e6 if first is not None else None
        out.add("first_frame", "ms", _r(value, 3), description="start request sent -> end of the first inference")
    if cold_starts_ms:
        cold = Histogram("first_frame", "us").record_all(round(v * 1000) for v in cold_starts_ms)
        out.add_distribution(cold, "cold start: model load request sent -> end of the first inference")
    timing = frame_timing(frames)
    out.histograms += [timing.frame_time, timing.deviation]
    out.add("frames", "count", timing.frames)
    out.add("inferences", "count", timing.inferences)
    out.add("fps", "FPS", _r(timing.fps, 3), samples=timing.inferences, description="1 / mean frame time")
    out.add("fps_1pct_low", "FPS", _r(timing.low_1pct_fps, 3), samples=max(0, timing.inferences - 1),
            flags=_few(timing.inferences - 1, 99.0), description="1 / P99 frame time")  # fmt: skip
    out.add("frame_jitter_std", "us", _r(timing.jitter_std_us, 1), samples=timing.inferences,
            description="std of t0 - due")  # fmt: skip
    out.add("frame_jitter_p99", "us", timing.jitter_p99_us, samples=timing.inferences,
            flags=_few(timing.inferences, 99.0), description="P99 of |t0 - due|")  # fmt: skip
    out.add("stutters", "count", timing.stutters, description="frame time > 2.5x moving average of 30")
    out.add("skipped_frames", "count", timing.skipped)
    out.add("late_frames", "count", timing.late)

    peaks = [s["mem_peak"] for s in stats if isinstance(s.get("mem_peak"), int | float)]
    out.add("mem_peak", "B", max(peaks) if peaks else None, samples=len(peaks))

    out.faults = [fault_event(dict(f), clock) for f in faults]
    counts = fault_counts(out.faults)
    out.add("faults", "count", len(out.faults))
    for kind in sorted(counts):
        out.add(f"faults_{kind}", "count", counts[kind])
    rollbacks = [f.rollback_us for f in out.faults if f.rollback_us is not None]
    if rollbacks:
        out.add("rollback_time_max", "us", max(rollbacks), samples=len(rollbacks))

    if send_errors_ns is not None:
        hist = Histogram("replay_send_error", "ns").record_all(send_errors_ns)
        out.add_distribution(hist, "replayer: actual - scheduled send time")
    return out


def _r(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def _few(count: int, percentile: float) -> tuple[str, ...]:
    return too_few_flags(max(0, count), (percentile,))

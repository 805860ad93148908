"""Inference latency (device clock) and end-to-end decision latency (bench clock) with deadline misses.

End-to-end decision latency of an input = bench time of the end of the first inference that used it
(the first inference frame, in time order, whose `seq` is at or past the input's seq; `t1` mapped to
the bench clock with the device's clock offset) minus the bench time the input was sent. An input
with no such inference by the end of the run is `undecided`; it counts as a deadline miss when the
run went on for longer than the budget after it was sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.agent.frame import Frame
from bench.measure.histogram import Histogram
from bench.measure.records import DeviceClock


def inference_latency(records: Sequence[Frame]) -> Histogram:
    """Inference time (Frame.infer_us: t1 - t0, us, device clock) of every frame whose inference ran."""
    return Histogram("inference_latency", "us").record_all(r.infer_us for r in records if r.infer_us is not None)


@dataclass(frozen=True)
class DecisionLatency:
    """Per-input end-to-end latencies and their deadline verdicts."""

    histogram: Histogram  # us, bench clock
    budget_ms: float
    misses: int  # decided late, or undecided for longer than the budget
    decided: int
    undecided: int
    clock_inconsistent: int  # decisions that seemed to come before the input was sent (clock error)


def decision_latency(
    records: Sequence[Frame],
    sent_ns: Mapping[int, int],
    clock: DeviceClock,
    budget_ms: float,
    end_ns: int | None = None,
) -> DecisionLatency:
    """Decision latency of every sent input (seq -> bench send ns); `end_ns` is when the run stopped
    listening for frames (bench clock; default: the last decision seen)."""
    decisions = sorted((clock.to_bench_ns(r.t1), r.seq) for r in records if r.ran and r.t1 is not None and r.seq >= 0)
    inputs = sorted(sent_ns.items())
    latencies_us: list[float] = []
    budget_ns = budget_ms * 1e6
    misses = decided = 0
    k = 0
    covered = -1  # highest input seq any decision so far has used
    for decided_at, seq in decisions:
        covered = max(covered, seq)
        while k < len(inputs) and inputs[k][0] <= covered:
            latency_ns = decided_at - inputs[k][1]
            latencies_us.append(latency_ns / 1000)
            decided += 1
            if latency_ns > budget_ns:
                misses += 1
            k += 1
    stop = end_ns if end_ns is not None else (decisions[-1][0] if decisions else 0)
    hist = Histogram("decision_latency", "us").record_all(latencies_us)
    undecided = inputs[k:]
    misses += sum(1 for _, sent in undecided if stop - sent > budget_ns)
    return DecisionLatency(hist, budget_ms, misses, decided, len(undecided), hist.clamped)

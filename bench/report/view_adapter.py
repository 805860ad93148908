"""Read one stored run into a RunView (the picture the report uses; verdicts read stored measurements). Thin: the
store's data, in arrays and the units the report shows (ms, µs, MB).

Sources: HDR histograms give the distributions the report plots (`decision_latency`, `inference_latency`,
`frame_time`, `frame_deviation`, and, when a run stores them, `first_frame` and `mem_peak`); frame records
give the per-frame trace the time plots show (interval between inference starts, t0 - due); scalar
measurements (the figures, computed once by bench.measure), faults and device status come as stored; model
updates from the device's info (`bench.report.ota_results`). A run whose raw rows retention pruned
(bench.store.retention) has no frame trace: a note says so instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np

from bench.core.outcomes import FailureClass
from bench.core.units import factor, figure
from bench.measure.energy import DEVICE_CLOCK, MARKER
from bench.measure.frames import deviation_us, frame_time_us
from bench.measure.histogram import Histogram, histogram_values
from bench.report.ota_results import ota_transfers
from bench.report.runview import (
    FIRST_FRAME_MS,
    FRAME_DEVIATION_US,
    FRAME_INTERVAL_MS,
    INFERENCE_MS,
    LATENCY_MS,
    MEMORY_PEAK_MB,
    DeviceView,
    FrameTrace,
    RunView,
    Samples,
    TimelineFault,
    TimeSeries,
)
from bench.store.frame_columns import FrameColumns
from bench.store.reading import RunRecord
from bench.store.results import ResultStore

# stored histogram name -> (RunView source, target unit)
HISTOGRAM_SOURCES = {
    "decision_latency": (LATENCY_MS, "ms"),
    "frame_time": (FRAME_INTERVAL_MS, "ms"),
    "frame_deviation": (FRAME_DEVIATION_US, "us"),
    "inference_latency": (INFERENCE_MS, "ms"),
    "first_frame": (FIRST_FRAME_MS, "ms"),
    "mem_peak": (MEMORY_PEAK_MB, "MB"),
}
# stored scalar measurement -> RunView source, used when a run has no histogram of it (one sample). Memory peak is
# the agent's own high-water mark (`mem_peak`), never the board's memory in use (telemetry, shown on its own).
SCALAR_SOURCES = {"first_frame": (FIRST_FRAME_MS, "ms"), "mem_peak": (MEMORY_PEAK_MB, "MB")}


def load_run(store: ResultStore, run_id: int, *, frames: bool = True) -> RunView:
    """Everything the report and the verdicts need of run `run_id`. `frames=False` skips the frame records
    (only the time plots need them; a baseline's verdict samples come from its histograms)."""
    return view_of(store.reading.run(run_id, frames=frames))


def view_of(record: RunRecord) -> RunView:
    """The report's view of a run read by the store's read model (bench.store.reading)."""
    row = record.run
    meta = {k: str(v) for k, v in (("kind", row.kind), ("bench", row.bench), ("session", row.session),
                                   ("git", row.git_rev)) if v}  # fmt: skip
    view = RunView(run_id=str(row.id), started_at=row.started_at, status=row.status, label=row.kind, meta=meta)
    for stored in (d for d in record.devices.values() if d.listed):
        dev = stored.row
        trace, first_t0_us, models, first_rx_ns = _frames(stored.frames)
        device = DeviceView(name=dev.name, kind=dev.kind, frames=trace)
        add_stored(device, stored.measurements, stored.histograms.values())
        device.ota = ota_transfers(dev.info)
        device.model_versions = [f"v{m}" for m in models]
        for update in device.ota:
            for label in (update.model_from, update.model_to if update.result == "ok" else ""):
                if label and label not in device.model_versions:
                    device.model_versions.append(label)
        if dev.status not in ("ok", "running", "done", "finished"):
            device.notes.append(f"device status {dev.status}: {dev.detail}".rstrip(": "))
        device.notes += outcome_notes(dev.info)
        device.notes += [f"telemetry: {e}" for e in dev.info.get("telemetry_errors", [])]
        if stored.pruned_at:
            device.notes.append(pruned_note(stored.pruned_at))
        if dev.info.get("voice_mode"):  # what the replay sent it: voice as PCM or features, and why
            device.notes.append(f"inputs: voice as {dev.info['voice_mode']} ({dev.info.get('voice_reason', '')})")
        if dev.info.get("dropped_inputs"):
            device.notes.append(f"{dev.info['dropped_inputs']} input(s) dropped while the agent was recovered")
        device.faults = [fault_event(f, first_t0_us, first_rx_ns) for f in stored.faults]
        device.telemetry = time_series(stored.telemetry, origin_ns=first_rx_ns)
        device.meter, device.energy_na, device.energy_windows = _meter(stored.measurements)
        view.devices[dev.name] = device
    return view


ENERGY_NA = {
    "meter_too_slow_for_decisions": "the meter's samples are too long to tell one decision from the idle time",
    "meter_failed": "the power meter did not measure this run",
    "no_measured_decisions": "no inference window fell inside the meter's samples",
    "no_meter_samples": "the power meter gave no samples",
}


def _meter(measurements: list) -> tuple[str, str, str]:
    """The meter named in the stored energy figures, why energy per decision is n/a, and where its decision windows
    came from (all "" when there is no meter)."""
    session = next((m for m in measurements if m.name == "energy_session"), None)
    if session is None:
        return "", "", ""
    meter = session.description.partition("meter: ")[2] or session.description
    p50 = next((m for m in measurements if m.name == "energy_per_decision_p50"), None)
    flags = p50.flags if p50 is not None else ()
    why = next((ENERGY_NA[f] for f in flags if f in ENERGY_NA), "")
    if MARKER in flags:
        windows = "each decision is a high run of the inference marker on the meter's logic input (no clock mapping)"
    elif DEVICE_CLOCK in flags:
        windows = "the meter's readings and the decisions both on the device's clock (no clock mapping)"
    else:
        windows = "inference windows mapped to the bench clock through the device's clock offset and drift"
    return meter, why if p50 is None or p50.value is None else "", windows


def pruned_note(at: str) -> str:
    """The line that stands in for the plots only raw rows can draw, once retention removed them."""
    return (
        f"frame interval over time and fault timeline: not shown, this run's raw frame and input rows were pruned"
        f" on {at[:10]} (results retention, docs/results.md); figures and distributions are from stored histograms"
    )


class StoredFigure(Protocol):
    """A stored measurement as the view needs it (bench.measure's Measurement and the store's rows fit)."""

    name: str
    unit: str
    value: float | None
    samples: int | None


def add_stored(device: DeviceView, measurements: Iterable[StoredFigure], histograms: Iterable[Histogram]) -> None:
    """Put a device's stored measurements (figures and their counts) and the sample series of its stored histograms
    (those the report plots, in the units it shows) into `device`."""
    for m in measurements:
        device.scalars[m.name] = (m.value, m.unit)
        device.counts[m.name] = m.samples
    device.decision_budget_ms = device.scalars.get("decision_budget", (None, ""))[0]
    for hist in histograms:
        if hist.name in HISTOGRAM_SOURCES:
            source, unit = HISTOGRAM_SOURCES[hist.name]
            device.samples[source] = Samples(unit, histogram_values(hist) * _factor(hist.unit, unit, hist.name))
    for name, (source, unit) in SCALAR_SOURCES.items():
        value, stored_unit = device.scalars.get(name, (None, ""))
        if source not in device.samples and value is not None:
            device.samples[source] = Samples(unit, np.array([value * _factor(stored_unit, unit, name)]))


def outcome_notes(info: dict) -> list[str]:
    """The device's failure class in the run (bench.core.outcomes) when it is not a plain pass, the cause of its
    regression (bench.nightly.attribution) and its retry's class."""
    notes = []
    stored = info.get("outcome")
    if stored and (stored.get("class") != FailureClass.PASS or stored.get("passed_on_retry")):
        notes.append(f"outcome: {stored.get('label')}")
    cause = info.get("cause")
    if cause and cause.get("text"):
        notes.append(str(cause["text"]))
    retry = info.get("retry")
    if retry:
        notes.append(f"retried in run {retry['run_id']}: {retry['outcome']['label']}")
    return notes


def _frames(columns: FrameColumns | None) -> tuple[FrameTrace | None, int | None, list[int], int | None]:
    """Frame timing of the inference frames, the first t0 (device us), the model versions seen and the bench time
    the first inference frame arrived (puts bench-clock events on the frame time axis); nothing without records."""
    if columns is None:
        return None, None, [], None
    inference = columns.values["ran"] == 1
    ran = inference & columns.present("t0")
    if not ran.any():
        return None, None, [], None
    t0 = columns.values["t0"][ran].astype(float)
    deviation = deviation_us(t0, columns.values["due"][ran])
    deviation[~columns.present("due")[ran]] = np.nan  # no schedule reported for that frame
    interval_ms = np.concatenate([[np.nan], frame_time_us(t0[:-1], t0[1:]) / 1000.0])
    trace = FrameTrace(t_s=(t0 - t0[0]) / 1e6, interval_ms=interval_ms, deviation_us=deviation)
    models = sorted(int(m) for m in np.unique(columns.values["model"][ran & columns.present("model")]) if m >= 0)
    received = inference & columns.present("rx_ns")
    first_rx_ns = int(columns.values["rx_ns"][received][0]) if received.any() else None
    return trace, int(t0[0]), models, first_rx_ns


def fault_event(f, first_t0_us: int | None = None, first_rx_ns: int | None = None) -> TimelineFault:
    """A stored fault as the report shows it, timed from the device's first frame when known."""
    if f.t_fault_us is not None and first_t0_us is not None:
        t_s = (f.t_fault_us - first_t0_us) / 1e6
    elif f.t_fault_bench_ns is not None and first_rx_ns is not None:  # seen by the bench (agent exit, link loss)
        t_s = (f.t_fault_bench_ns - first_rx_ns) / 1e9
    else:
        t_s = None
    outcome = []
    if f.rollback_us is not None:
        outcome.append(f"rolled back to v{f.prev_version} in {figure(f.rollback_us, 'us')}")
    if f.since_switch_ms is not None:
        outcome.append(f"{figure(f.since_switch_ms, 'ms')} after the switch to v{f.model_version}")
    if f.rollback_us is None and f.t_switch_us is None and f.prev_version is not None:  # refused before a switch
        outcome.append(f"refused, v{f.prev_version} kept running")
    return TimelineFault(
        t_s=t_s, kind=f.kind, detail=" ".join(x for x in (f.cause, f.detail) if x), outcome="; ".join(outcome)
    )


def _factor(unit: str, target: str, name: str) -> float:
    try:
        return factor(unit, target)
    except ValueError:
        raise ValueError(f"stored {name} is in {unit!r}; the report cannot convert it to {target}") from None


def time_series(rows: list[tuple[str, str, int, float]], origin_ns: int | None = None) -> dict[str, TimeSeries]:
    """A device's telemetry values (name, unit, t_ns, value) as time series, in seconds since `origin_ns` (bench
    clock; default: the device's first sample)."""
    if not rows:
        return {}
    origin = origin_ns if origin_ns is not None else min(r[2] for r in rows)
    grouped: dict[str, tuple[str, list[float], list[float]]] = {}
    for name, unit, t_ns, value in rows:
        _, ts, vs = grouped.setdefault(name, (unit, [], []))
        ts.append((t_ns - origin) / 1e9)
        vs.append(value)
    return {name: TimeSeries(unit, np.asarray(ts), np.asarray(vs)) for name, (unit, ts, vs) in grouped.items()}

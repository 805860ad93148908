"""Assemble one run's report: the JSON-ready data (`--json` emits exactly this) and the inline-SVG plots."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bench.core.units import convert, factor
from bench.energy.store import POWER_NAME, WINDOWS_NAME
from bench.report import svg
from bench.report.downsample import cdf_points, minmax_buckets, rate_per_window
from bench.report.measures import BENCH_CLOCK_FIELDS
from bench.report.runview import LATENCY_MS, DeviceView, RunView
from bench.report.summary import DeviceSummary, summarize
from bench.results.clocks import COUNTED_TIMING, GUEST_TIMING, ICOUNT_TIMING
from bench.results.verdict import (
    COLLECTING,
    IMPROVED,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REGRESSION,
    UNCHANGED,
    Verdict,
    collecting_summary,
)

TREND_RUNS = 30  # how many past runs the trend plots show


@dataclass(frozen=True)
class HistoryPoint:
    """One earlier run as the trend plots need it: its identity and per-device summaries."""

    run_id: str
    started_at: str
    summaries: dict[str, DeviceSummary]


@dataclass
class Report:
    """A rendered-to-be report: `data` is JSON-ready; `plots[device][name]` are SVG strings."""

    data: dict
    plots: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.data["run"]["run_id"]


def build_report(
    run: RunView,
    *,
    verdicts: list[Verdict] | None = None,
    baseline: RunView | None = None,
    baseline_name: str | None = None,
    history: list[HistoryPoint] | None = None,
    thresholds_file: str | None = None,
    what_changed: dict[str, list[str]] | None = None,
    host: dict | None = None,
    clocks: dict[str, str] | None = None,
    virtual: frozenset[str] = frozenset(),
    bisect: dict[str, str] | None = None,
    alerts: dict | None = None,
) -> Report:
    """Everything the report shows about `run`, compared with `baseline` (if any) and trended over `history`."""
    verdicts = verdicts or []
    history = [h for h in (history or []) if h.run_id != run.run_id][-(TREND_RUNS - 1) :]
    summaries = {name: summarize(device) for name, device in run.devices.items()}
    trend_points = [*history, HistoryPoint(run.run_id, run.started_at, summaries)]
    regressions = [v for v in verdicts if v.status == REGRESSION]
    data = {
        "run": {
            "run_id": run.run_id,
            "started_at": run.started_at,
            "label": run.label,
            "status": run.status,
            "meta": dict(run.meta),
        },
        "baseline": {
            "name": baseline_name,
            "run_id": baseline.run_id if baseline else None,
            "thresholds_file": thresholds_file,
        },
        "outcome": {
            "regressions": len(regressions),
            "regressed_devices": sorted({v.device for v in regressions}),
            "verdict": outcome_of(verdicts),
            "inconclusive": inconclusive_causes(verdicts),
            "not_reproduced": [v.to_dict() for v in verdicts if v.status == NOT_REPRODUCED],
            "collecting": collecting_summary(verdicts),
            "bisect": bisect or {},  # device -> the `hilbench bisect` command to copy
        },
        "changes": what_changed or {},
        "alerts": alerts or {},  # bench.alerts.night.NightAlerts.to_json(): the run's new, known and fixed alerts
        "host": host or {},
        "devices": [],
    }
    report = Report(data)
    for name, device in run.devices.items():
        device_verdicts = [v for v in verdicts if v.device == name]
        trend = [
            {"run_id": p.run_id, "started_at": p.started_at, **p.summaries[name].to_dict()}
            for p in trend_points
            if name in p.summaries
        ]
        timing = (clocks or {}).get(name, "")  # bench.results.clocks.device_timing
        icount = timing == ICOUNT_TIMING  # bench-clock figures mean nothing there
        data["devices"].append(
            {
                "name": name,
                "kind": device.kind,
                "icount": icount,
                "timing": timing,
                "virtual": name in virtual,  # its telemetry is the stand-in's model, not silicon
                "summary": without_bench_clock(summaries[name].to_dict()) if icount else summaries[name].to_dict(),
                "verdicts": [{**v.to_dict(), "since": worse_since(v, trend)} for v in device_verdicts],
                "faults": [vars(f) for f in device.faults],
                "ota": [vars(o) for o in device.ota],
                "notes": list(device.notes),
                "meter": device.meter,
                "energy_na": device.energy_na,
                "energy_windows": device.energy_windows,
                "telemetry": telemetry_summary(device),
                "trend": trend,
            }
        )
        base_device = baseline.devices.get(name) if baseline else None
        report.plots[name] = device_plots(
            device,
            base_device,
            data["devices"][-1]["trend"],
            icount=icount,
            guest=timing in (GUEST_TIMING, COUNTED_TIMING),
        )
        report.plots[name].update(drift_plots(device_verdicts, data["devices"][-1]["trend"]))
    return report


def without_bench_clock(summary: dict) -> dict:
    """An icount guest's summary with its bench-clock figures (latency, deadline misses, first frame) set to None,
    so `--json` does not hand a machine a number the page shows as n/a."""
    return {k: (None if k in BENCH_CLOCK_FIELDS else v) for k, v in summary.items()}


def inconclusive_causes(verdicts: list[Verdict]) -> list[dict]:
    """Per device with an inconclusive verdict, why (its first such verdict's cause: "replay off pace (...)",
    "bench host busy (...)"), so the page never calls a quiet host busy."""
    causes: dict[str, str] = {}
    for v in verdicts:
        if v.status == INCONCLUSIVE and v.device not in causes:
            causes[v.device] = v.reason.removeprefix("inconclusive: ").split(";")[0]
    return [{"device": d, "cause": causes[d]} for d in sorted(causes)]


def outcome_of(verdicts: list[Verdict]) -> str:
    """regression, pass, collecting baseline, or no baseline: what a run's verdicts add up to."""
    if any(v.status == REGRESSION for v in verdicts):
        return "regression"
    judged = (IMPROVED, UNCHANGED, INCONCLUSIVE, NOT_REPRODUCED)
    if any(v.status == COLLECTING for v in verdicts) and not any(v.status in judged for v in verdicts):
        return "collecting baseline"
    return "pass" if verdicts else "no baseline"


# verdict metric -> the trend field that estimates the same statistic (trends come from stored measurements)
SINCE_FIELDS = {
    "latency_p50": "latency_p50_ms", "latency_p99": "latency_p99_ms", "fps": "fps", "low_1pct_fps": "low_1pct_fps",
    "first_frame_ms": "first_frame_ms",
}  # fmt: skip
# ...and the fields a drift's trend plot can draw (the same figure in the trend's unit)
TREND_FIELDS = {
    **SINCE_FIELDS, "inference_p50": "inference_p50_ms", "memory_peak": "memory_peak_mb",
    "jitter_std": "jitter_std_us", "latency_p95": "latency_p95_ms",
}  # fmt: skip
TREND_AXES = {"_ms": "ms", "_mb": "MB", "_us": "µs", "fps": "FPS"}  # trend field ending -> its unit


def worse_since(verdict: Verdict, trend: list[dict]) -> dict | None:
    """For a regression: the first run of the unbroken streak, ending with this run, in which the metric was worse
    than the baseline by at least the threshold (its point estimate, from the trend). None when not applicable."""
    if verdict.status == REGRESSION and verdict.is_drift:  # a drift says where it starts
        first = next((p for p in trend if p["run_id"] == str(verdict.drift_since)), None)
        return {"run_id": str(verdict.drift_since), "started_at": first["started_at"] if first else "",
                "runs": verdict.drift_nights, "from_window_start": False}  # fmt: skip
    field = SINCE_FIELDS.get(verdict.metric)
    if verdict.status != REGRESSION or field is None or not verdict.baseline_value:
        return None
    factor = verdict.threshold_pct / 100
    higher = verdict.worse == "higher"
    # stored unit -> trend's
    to_trend = convert(1.0, verdict.unit, "ms") if field.endswith("_ms") and verdict.unit else 1.0
    limit = verdict.baseline_value * to_trend * (1 + factor if higher else 1 - factor)
    worse = [p.get(field) is not None and (p[field] >= limit if higher else p[field] <= limit) for p in trend]
    if not worse or not worse[-1]:
        return None
    first = len(worse) - 1
    while first > 0 and worse[first - 1]:
        first -= 1
    point = trend[first]
    return {"run_id": point["run_id"], "started_at": point["started_at"], "runs": len(worse) - first,
            "from_window_start": first == 0 and len(trend) > 1}  # fmt: skip


MIN_RATE_WINDOWS = 3  # an FPS-over-time plot of fewer 1 s windows is a dot, not a trend


def device_plots(
    device: DeviceView, baseline: DeviceView | None, trend: list[dict], *, icount: bool = False, guest: bool = False
) -> dict[str, str]:
    """The SVG plots of one device. On an icount guest the bench-clock plots (decision latency) are left out, unless
    the replay ran on the guest's clock (`guest`), and the frame plots' time axis is the guest's clock."""
    plots: dict[str, str] = {}
    frames = device.frames
    latency = None if icount else device.series(LATENCY_MS)
    time_axis = "guest-clock time since run start (s)" if icount or guest else "time since run start (s)"
    if latency is not None and len(latency):
        lines = [svg.Line(*cdf_points(latency.values), label="this run")]
        base_latency = baseline.series(LATENCY_MS) if baseline is not None else None
        if base_latency is not None and len(base_latency):
            lines.append(
                svg.Line(*cdf_points(base_latency.values), label="baseline", color=svg.PALETTE[1], dashed=True)
            )
        for line in lines:
            line.step = True
        plots["latency_cdf"] = svg.render(
            svg.Plot(
                "Decision latency CDF", "latency (ms)", "fraction of inputs (0-1)", lines=lines, y_range=(0.0, 1.0)
            )
        )
    if frames is not None and len(frames):
        t, low, high, mean = minmax_buckets(frames.t_s, frames.interval_ms)
        plots["frame_interval"] = svg.render(
            svg.Plot(
                "Frame interval over time",
                time_axis,
                "frame interval (ms)",
                bands=[svg.Band(t, low, high, label="min-max per bucket")],
                lines=[svg.Line(t, mean, label="mean per bucket")],
                markers=fault_markers(device),
            )
        )
        t, fps = rate_per_window(frames.t_s)
    if frames is not None and t.size >= MIN_RATE_WINDOWS:
        plots["fps"] = svg.render(
            svg.Plot(
                "FPS over time",
                time_axis,
                "frames per second (FPS)",
                lines=[svg.Line(t, fps, label="FPS (1 s windows)")],
                markers=fault_markers(device),
                y_range=(0.0, float(np.max(fps)) * 1.1 if fps.size else 1.0),
            )
        )
    timed = [f for f in device.faults if f.t_s is not None]  # a fault nobody timed has no place on a time axis
    if timed:
        end = float(device.frames.t_s[-1]) if frames is not None and len(frames) else max(f.t_s for f in timed)
        events = [(f.t_s, f.kind, f"{f.kind} at {f.t_s:.1f} s: {f.detail} {f.outcome}".strip()) for f in timed]
        if end > 0:
            plots["faults"] = svg.timeline("Fault timeline", events, end)
    plots.update(telemetry_plots(device))
    plots.update(power_plot(device))
    if len(trend) >= 2 and not icount:
        latency = [("latency_p50_ms", "P50", 0), ("latency_p95_ms", "P95", 1), ("latency_p99_ms", "P99", 2)]
        plots["trend_latency"] = trend_plot("Latency", "latency (ms)", trend, latency)
    if len(trend) >= 2:
        fps = [("fps", "FPS", 0), ("low_1pct_fps", "1% low", 2)]
        plots["trend_fps"] = trend_plot("FPS", "frames per second (FPS)", trend, fps)
    return plots


def trend_plot(what: str, y_label: str, trend: list[dict], series: list[tuple[str, str, int]]) -> str:
    """`what` over the trend's runs (at least two), one line per (trend field, label, palette index)."""
    x = np.arange(len(trend), dtype=float)
    ticks = [(float(i), p["run_id"][-10:]) for i, p in enumerate(trend) if i % max(1, len(trend) // 6) == 0]
    lines = [svg.Line(x, _column(trend, key), label=label, color=svg.PALETTE[c]) for key, label, c in series]
    return svg.render(svg.Plot(f"{what} over the last {len(trend)} runs", "run", y_label, x_ticks=ticks, lines=lines))


def drift_plots(verdicts: list[Verdict], trend: list[dict]) -> dict[str, str]:
    """For each drift (a stored or suspected drift verdict): its figure over the trend's runs, with the change point
    (the drift's first night) marked and the reference's mean drawn dashed up to it."""
    plots = {}
    for v in verdicts:
        field = TREND_FIELDS.get(v.metric)
        if v.drift_since is None or field is None or len(trend) < 2:
            continue
        ids = [p["run_id"] for p in trend]
        x, y = np.arange(len(trend), dtype=float), _column(trend, field)
        at = float(ids.index(str(v.drift_since))) if str(v.drift_since) in ids else 0.0
        unit = next((u for end, u in TREND_AXES.items() if field.endswith(end)), "")
        try:
            to_trend = factor(v.unit, unit)
        except ValueError:  # a figure with no time or size unit (FPS, a count) is plotted as stored
            to_trend = 1.0
        lines = [svg.Line(x, y, label=v.title)]
        if v.baseline_value is not None:
            level = v.baseline_value * to_trend
            lines.append(svg.Line(np.array([0.0, at]), np.array([level, level]), label="reference mean",
                                  color=svg.PALETTE[1], dashed=True))  # fmt: skip
        since = f"drift since run {v.drift_since} ({v.drift_nights} nights, {v.effect_pct:+.0f}%)"
        ticks = [(float(i), p[-10:]) for i, p in enumerate(ids) if i % max(1, len(ids) // 6) == 0]
        plots[f"trend_drift_{v.metric}"] = svg.render(
            svg.Plot(
                f"{v.title} over the last {len(trend)} runs: {since}", "run", f"{v.title.split(' (')[0]} ({unit})",
                lines=lines, markers=[svg.Marker(at, since, svg.DRIFT)], x_ticks=ticks,
            )
        )  # fmt: skip
    return plots


# telemetry value -> (plot key, title, y axis label)
TELEMETRY_PLOTS = {
    "temp_c": ("telemetry_temp", "Board temperature (hottest zone)", "temperature (°C)"),
    "cpu_mhz": ("telemetry_cpu", "CPU frequency", "frequency (MHz)"),
    "mem_used_mb": ("telemetry_mem", "Memory in use", "memory (MB)"),
}


def telemetry_summary(device: DeviceView) -> list[dict]:
    """min/mean/max of each telemetry value of the device (sorted by name)."""
    return [
        {
            "name": name,
            "unit": series.unit,
            "n": int(series.values.size),
            "min": float(np.min(series.values)),
            "mean": float(np.mean(series.values)),
            "max": float(np.max(series.values)),
        }
        for name, series in sorted(device.telemetry.items())
        if series.values.size and name not in (POWER_NAME, WINDOWS_NAME)  # the energy figures and plot show them
    ]


def telemetry_plots(device: DeviceView) -> dict[str, str]:
    """Temperature, CPU frequency and memory over the run, with faults and throttled samples marked."""
    plots: dict[str, str] = {}
    throttled = device.telemetry.get("throttled_now")
    throttle_marks = (
        [
            svg.Marker(float(t), f"throttled at {t:.1f} s", svg.PALETTE[1])
            for t, v in zip(throttled.t_s, throttled.values, strict=True)
            if v > 0
        ]
        if throttled is not None
        else []
    )
    for name, (key, title, y_label) in TELEMETRY_PLOTS.items():
        series = device.telemetry.get(name)
        if series is None or not series.values.size:
            continue
        plots[key] = svg.render(
            svg.Plot(
                title,
                "time since run start (s)",
                y_label,
                lines=[svg.Line(series.t_s, series.values, label=name)],
                markers=fault_markers(device) + (throttle_marks if name == "temp_c" else []),
            )
        )
    return plots


def power_plot(device: DeviceView) -> dict[str, str]:
    """The meter's power over the run, the inference windows shaded under it."""
    power = device.telemetry.get(POWER_NAME)
    if power is None or not power.values.size:
        return {}
    bands = []
    windows = device.telemetry.get(WINDOWS_NAME)
    if windows is not None and windows.values.size:
        top = float(np.max(power.values))
        bands.append(svg.Band(windows.t_s, np.zeros_like(windows.values), windows.values * top,
                              label="inference windows (t0..t1)", color=svg.PALETTE[1]))  # fmt: skip
    return {"power": svg.render(svg.Plot(
        f"Power over time ({device.meter or 'power meter'})", "time since run start (s)", "power (mW)",
        bands=bands, lines=[svg.Line(power.t_s, power.values, label="meter power")], markers=fault_markers(device),
    ))}  # fmt: skip


def fault_markers(device: DeviceView) -> list[svg.Marker]:
    """Vertical markers for the device's faults, titled with what happened."""
    return [
        svg.Marker(f.t_s, f"{f.kind} at {f.t_s:.1f} s: {f.detail} {f.outcome}".strip())
        for f in device.faults
        if f.t_s is not None
    ]


def _column(trend: list[dict], key: str) -> np.ndarray:
    return np.array([p.get(key) if p.get(key) is not None else np.nan for p in trend], dtype=float)

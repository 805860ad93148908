"""Per-device summary figures of a run: what the report's table, trends and `--json` show.

Every figure is a stored measurement (bench.measure computed it once, at the end of the replay), read through the
metric catalogue and shown in the unit its field names; nothing is computed again here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from bench.core.units import convert
from bench.measure.catalogue import metric
from bench.report.runview import DeviceView


@dataclass(frozen=True)
class DeviceSummary:
    """One device's headline numbers for one run (None: the run stored no such figure). Units are in the names."""

    device: str
    kind: str
    latency_n: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    inference_n: int
    inference_p50_ms: float | None
    frames: int  # inference frames
    fps: float | None
    low_1pct_fps: float | None
    jitter_std_us: float | None
    jitter_p99_us: float | None
    deadline_budget_ms: float | None
    deadline_misses: int | None
    stutters: int | None
    first_frame_n: int
    first_frame_ms: float | None  # median of the cold starts (or the one start)
    memory_peak_mb: float | None
    faults: int
    ota_transfers: int
    model_versions: tuple[str, ...]
    replay_session_s: float | None = None  # the session's length
    replay_covered_s: float | None = None  # how much of it was played, from the start
    pace_clock: str | None = None  # the replay's fidelity figure: "bench" (send error), "device" (release error)
    pace_p50_ms: float | None = None
    pace_p99_ms: float | None = None
    pace_max_ms: float | None = None
    energy_n: int = 0  # decisions the energy figures rest on
    energy_p50_mj: float | None = None  # energy per decision (devices with a power meter)
    energy_p99_mj: float | None = None
    power_inferring_mw: float | None = None
    power_idle_mw: float | None = None
    energy_session_mj: float | None = None
    power_mean_mw: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready form."""
        data = asdict(self)
        data["model_versions"] = list(self.model_versions)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


# DeviceSummary field -> the stored measurements it shows (the first the run has), and the field's unit
FIGURES: dict[str, tuple[tuple[str, ...], str]] = {
    "latency_p50_ms": (("decision_latency_p50",), "ms"),
    "latency_p95_ms": (("decision_latency_p95",), "ms"),
    "latency_p99_ms": (("decision_latency_p99",), "ms"),
    "inference_p50_ms": (("inference_latency_p50",), "ms"),
    "fps": (("fps",), "FPS"),
    "low_1pct_fps": (("fps_1pct_low",), "FPS"),
    "jitter_std_us": (("frame_jitter_std",), "us"),
    "jitter_p99_us": (("frame_jitter_p99",), "us"),
    "deadline_budget_ms": (("decision_budget",), "ms"),
    "deadline_misses": (("decision_deadline_misses",), "count"),
    "stutters": (("stutters",), "count"),
    "first_frame_ms": (("first_frame_p50", "first_frame"), "ms"),
    "memory_peak_mb": (("mem_peak",), "MB"),
    "replay_session_s": (("replay_session",), "s"),
    "replay_covered_s": (("replay_covered",), "s"),
    "energy_p50_mj": (("energy_per_decision_p50",), "mJ"),
    "energy_p99_mj": (("energy_per_decision_p99",), "mJ"),
    "power_inferring_mw": (("power_inferring",), "mW"),
    "power_idle_mw": (("power_idle",), "mW"),
    "energy_session_mj": (("energy_session",), "mJ"),
    "power_mean_mw": (("power_mean",), "mW"),
}
# DeviceSummary count field -> the figure whose observation count it is
COUNTS = {"latency_n": "latency_p50_ms", "inference_n": "inference_p50_ms", "first_frame_n": "first_frame_ms",
          "energy_n": "energy_p50_mj"}  # fmt: skip
INTEGER_FIELDS = frozenset({"deadline_misses", "stutters"})


def source(device: DeviceView, field: str) -> str | None:
    """The stored measurement `field` shows for `device` (None when the run stored none of them)."""
    names, _ = FIGURES[field]
    return next((n for n in names if device.scalars.get(n, (None, ""))[0] is not None), None)


def stored(device: DeviceView, field: str) -> float | None:
    """The stored figure behind summary `field`, in the field's unit."""
    name = source(device, field)
    if name is None:
        return None
    value, unit = device.scalars[name]
    shown = convert(value, unit or metric(name).unit, FIGURES[field][1])
    return int(shown) if field in INTEGER_FIELDS and shown is not None else shown


def observations(device: DeviceView, field: str) -> int:
    """How many observations the stored figure behind `field` rests on (0 when none is stored)."""
    name = source(device, field)
    if name is None:
        return 0
    return int(device.counts.get(name) or 1)


def summarize(device: DeviceView) -> DeviceSummary:
    """The headline numbers of `device`: its stored measurements (the figures the verdicts judge)."""
    figures = {field: stored(device, field) for field in FIGURES}
    counts = {field: observations(device, of) for field, of in COUNTS.items()}
    inferences = device.scalars.get("inferences", (None, ""))[0]
    return DeviceSummary(
        device=device.name,
        kind=device.kind,
        **counts,
        **figures,
        frames=int(inferences) if inferences is not None else 0,
        faults=len(device.faults),
        ota_transfers=len(device.ota),
        model_versions=tuple(device.model_versions),
        **_pace(device),
    )


PACE = {"bench": "replay_send_error", "device": "replay_release_error"}  # ns, bench.measure.replay_timing


def _pace(device: DeviceView) -> dict:
    """The replay's send (bench clock) or release (device clock) error P50/P99/max in ms, when stored."""
    for clock, name in PACE.items():
        values = [device.scalars.get(f"{name}_{q}", (None, ""))[0] for q in ("p50", "p99", "max")]
        if values[1] is not None:
            ms = [None if v is None else v / 1e6 for v in values]
            return {"pace_clock": clock, "pace_p50_ms": ms[0], "pace_p99_ms": ms[1], "pace_max_ms": ms[2]}
    return {}

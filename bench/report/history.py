"""Trend points from the results store: per-run device summaries read from the stored measurements
(cheap: no frame records are loaded), for the report's "last N runs" plots."""

from __future__ import annotations

from bench.report.build import TREND_RUNS, HistoryPoint
from bench.report.summary import DeviceSummary
from bench.results.store import ResultStore

US_TO_MS = 1e-3
B_TO_MB = 1e-6


def load_history(
    store: ResultStore, *, up_to: int, kind: str | None = None, session: str | None = None, limit: int = TREND_RUNS
) -> list[HistoryPoint]:
    """The `limit` runs up to and including run `up_to` (of the same `kind` and `session` if given), oldest
    first: a trend across sessions would plot a combat run next to a dialogue run as if one had regressed."""
    rows = [r for r in store.runs(kind=kind) if r.id <= up_to and (session is None or r.session == session)][:limit]
    points = []
    for run in reversed(rows):
        by_device: dict[str, dict[str, tuple[float | None, int | None]]] = {}
        for m in store.measurements(run.id):
            by_device.setdefault(m.device, {})[m.name] = (m.value, m.samples)
        kinds = {d.name: d.kind for d in store.devices(run.id)}
        summaries = {name: _summary(name, kinds.get(name, ""), values) for name, values in by_device.items()}
        points.append(HistoryPoint(str(run.id), run.started_at, summaries))
    return points


def _summary(device: str, kind: str, m: dict[str, tuple[float | None, int | None]]) -> DeviceSummary:
    def value(name: str, scale: float = 1.0) -> float | None:
        v = m.get(name, (None, None))[0]
        return v * scale if v is not None else None

    def count(name: str) -> int:
        v = m.get(name, (None, None))[0]
        return int(v) if v is not None else 0

    return DeviceSummary(
        device=device,
        kind=kind,
        latency_n=m.get("decision_latency_p50", (None, 0))[1] or 0,
        latency_p50_ms=value("decision_latency_p50", US_TO_MS),
        latency_p95_ms=value("decision_latency_p95", US_TO_MS),
        latency_p99_ms=value("decision_latency_p99", US_TO_MS),
        inference_n=m.get("inference_latency_p50", (None, 0))[1] or 0,
        inference_p50_ms=value("inference_latency_p50", US_TO_MS),
        frames=count("frames"),
        fps=value("fps"),
        low_1pct_fps=value("fps_1pct_low"),
        jitter_std_us=value("frame_jitter_std"),
        jitter_p99_us=value("frame_jitter_p99"),
        deadline_budget_ms=value("decision_budget"),
        deadline_misses=count("decision_deadline_misses"),
        stutters=count("stutters"),
        # the judged figure (median of the cold starts), else the session start's one sample (older runs)
        first_frame_n=m.get("first_frame_p50", (None, None))[1] or (1 if value("first_frame") is not None else 0),
        first_frame_ms=value("first_frame_p50", US_TO_MS)
        if value("first_frame_p50") is not None
        else value("first_frame"),
        memory_peak_mb=value("mem_peak", B_TO_MB),
        faults=count("faults"),
        ota_transfers=0,
        model_versions=(),
    )

"""Trend points from the results store: per-run device summaries read from the stored measurements
(cheap: no frame records are loaded), for the report's "last N runs" plots."""

from __future__ import annotations

from bench.report.build import TREND_RUNS, HistoryPoint
from bench.report.runview import DeviceView
from bench.report.summary import summarize
from bench.report.view_adapter import add_stored, fault_event
from bench.store.results import ResultStore


def load_history(
    store: ResultStore, *, up_to: int, kind: str | None = None, session: str | None = None, limit: int = TREND_RUNS
) -> list[HistoryPoint]:
    """The `limit` runs up to and including run `up_to` (of the same `kind` and `session` if given), oldest
    first: a trend across sessions would plot a combat run next to a dialogue run as if one had regressed."""
    rows = [r for r in store.runs.latest(kind=kind) if r.id <= up_to and (session is None or r.session == session)][
        :limit
    ]
    points = []
    for run in reversed(rows):
        kinds = {d.name: d.kind for d in store.runs.devices(run.id)}
        by_device: dict[str, list] = {}
        for m in store.measures.measurements(run.id):
            by_device.setdefault(m.device, []).append(m)
        devices = {name: DeviceView(name, kinds.get(name, "")) for name in by_device}
        for name, device in devices.items():
            add_stored(device, by_device[name], ())
        for name, fault in store.measures.faults(run.id):
            if name in devices:
                devices[name].faults.append(fault_event(fault))
        summaries = {name: summarize(device) for name, device in devices.items()}
        points.append(HistoryPoint(str(run.id), run.started_at, summaries))
    return points

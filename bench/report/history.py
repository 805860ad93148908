"""Trend points: per-run device summaries from the stored measurements (cheap: no frame records are loaded),
for the report's "last N runs" plots."""

from __future__ import annotations

from collections.abc import Iterable

from bench.report.build import TREND_RUNS, HistoryPoint
from bench.report.runview import DeviceView
from bench.report.summary import summarize
from bench.report.view_adapter import add_stored, fault_event
from bench.store.reading import RunRecord
from bench.store.results import ResultStore


def load_history(
    store: ResultStore, *, up_to: int, kind: str | None = None, session: str | None = None, limit: int = TREND_RUNS
) -> list[HistoryPoint]:
    """The `limit` runs up to and including run `up_to` (of the same `kind` and `session` if given), oldest
    first: a trend across sessions would plot a combat run next to a dialogue run as if one had regressed."""
    return history_of(store.reading.history(up_to=up_to, kind=kind, session=session, limit=limit))


def history_of(records: Iterable[RunRecord]) -> list[HistoryPoint]:
    """The trend points of runs read by the store's read model, in their order: each device with figures."""
    points = []
    for record in records:
        devices = {}
        for name, stored in record.devices.items():
            if not stored.measurements:
                continue
            device = devices[name] = DeviceView(name, stored.row.kind)
            add_stored(device, stored.measurements, ())
            device.faults += [fault_event(f) for f in stored.faults]
        summaries = {name: summarize(device) for name, device in devices.items()}
        points.append(HistoryPoint(str(record.run.id), record.run.started_at, summaries))
    return points

"""The read model: what a page shows of a run, a window's runs and a history, read from the stores in one go
(a handful of statements per run, whatever its number of devices), so that report/, results/ and alerts/ work
from what was loaded and never go back to the store for the same run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.store.alerts import UNTRIAGED, AlertEvent, AlertRow, AlertStore
from bench.store.frame_columns import FrameColumns
from bench.store.frames import FrameStore
from bench.store.measurements import MeasurementRow, MeasurementStore
from bench.store.raw import RawStore
from bench.store.runs import DeviceRow, RunRow, RunStore
from bench.store.verdicts import VerdictRow, VerdictStore


@dataclass
class DeviceRecord:
    """One device's part in a stored run."""

    row: DeviceRow
    measurements: list[MeasurementRow] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    telemetry: list[tuple[str, str, int, float]] = field(default_factory=list)
    frames: FrameColumns | None = None
    pruned_at: str | None = None  # when retention removed its raw rows
    listed: bool = True  # False: figures of a device the run's devices do not name


@dataclass
class RunRecord:
    """A stored run and its devices, by name."""

    run: RunRow
    devices: dict[str, DeviceRecord]


@dataclass
class NightRecord:
    """The alert changes a night's runs made, the alerts they changed and every untriaged alert."""

    events: list[AlertEvent]
    alerts: dict[int, AlertRow]
    untriaged: list[AlertRow]


@dataclass
class RunPage:
    """Everything a run's page shows, read once: the run, its stored verdicts, the run it is compared with, its
    history, the fingerprints and revisions of it and its bases, its host and its night's alerts."""

    record: RunRecord
    verdicts: list[VerdictRow]
    baseline: RunRecord | None
    history: list[RunRecord]
    fingerprints: dict[int, dict[str, dict[str, Any]]]
    git_revs: dict[int, str | None]
    host: dict[str, Any] | None
    night: NightRecord


class Reading:
    """Reads runs, histories and pages through the per-kind stores."""

    def __init__(
        self, runs: RunStore, frames: FrameStore, measures: MeasurementStore, verdicts: VerdictStore,
        alerts: AlertStore, raw: RawStore,
    ) -> None:  # fmt: skip
        self._runs, self._frames, self._measures = runs, frames, measures
        self._verdicts, self._alerts, self._raw = verdicts, alerts, raw

    def run(self, run_id: int, *, frames: bool = True) -> RunRecord:
        """Run `run_id` with every device's figures, faults, histograms and telemetry, and its frame records unless
        `frames` is False (only the time plots need them)."""
        (record,) = self.runs([run_id], [self._runs.run(run_id)])
        histograms = self._measures.histograms_of_run(run_id)
        telemetry = self._measures.telemetry(run_id)
        columns = self._frames.columns_of_run(run_id) if frames else {}
        pruned = self._raw.pruned(run_id)
        for name, device in record.devices.items():
            device.histograms = histograms.get(name, {})
            device.telemetry = telemetry.get(name, [])
            device.frames = columns.get(name) if frames else None
            device.pruned_at = pruned.get(name)
        return record

    def runs(self, run_ids: Iterable[int], rows: Iterable[RunRow] | None = None) -> list[RunRecord]:
        """The stored figures (measurements, faults; no histograms or frames) of runs `run_ids`, in that order."""
        ids = list(run_ids)
        found = {r.id: r for r in rows} if rows is not None else self._runs.runs_of(ids)
        records = {i: RunRecord(found[i], {}) for i in ids if i in found}
        for d in self._runs.devices_of_runs(records):
            records[d.run_id].devices[d.name] = DeviceRecord(d)
        for m in self._measures.of_runs(records):
            _device(records[m.run_id], m.device).measurements.append(m)
        for run_id, name, fault in self._measures.faults_of_runs(records):
            _device(records[run_id], name).faults.append(fault)
        return list(records.values())

    def history(self, *, up_to: int, kind: str | None, session: str | None, limit: int) -> list[RunRecord]:
        """The `limit` runs up to and including run `up_to` (of `kind` and `session` when given), oldest first."""
        rows = [r for r in self._runs.latest(kind=kind) if r.id <= up_to and (session is None or r.session == session)]
        shown = list(reversed(rows[:limit]))
        return self.runs([r.id for r in shown], shown)

    def night(self, run_ids: Iterable[int]) -> NightRecord:
        """The alert changes made with runs `run_ids`, the alerts they name and every untriaged alert."""
        events = self._alerts.events_of_runs(run_ids)
        return NightRecord(
            events, self._alerts.of_ids({e.alert_id for e in events}), self._alerts.select(states=[UNTRIAGED])
        )

    def page(self, run_id: int, *, pinned: int | None, trend: int) -> RunPage:
        """Run `run_id`'s page: its stored verdicts (none when `pinned`: it is judged against that run), the run it
        is compared with (`pinned`, else the newest base of its verdicts), its last `trend` runs of the same kind
        and session, and what the page names of it and its bases."""
        record = self.run(run_id)
        verdicts = self._verdicts.verdicts(run_id) if pinned is None else []
        bases = {max(v.data.get("baseline_runs") or [0]) for v in verdicts} - {0} | ({pinned} if pinned else set())
        shown = pinned if pinned is not None else max(bases, default=None)
        run = record.run
        return RunPage(
            record=record,
            verdicts=verdicts,
            baseline=self.run(shown, frames=False) if shown else None,
            history=self.history(up_to=run_id, kind=run.kind or None, session=run.session or None, limit=trend),
            fingerprints=self.fingerprints({run_id, *bases}),
            git_revs=self.revisions({run_id, *bases}),
            host=self._verdicts.host_of(run_id),
            night=self.night([run_id]),
        )

    def revisions(self, run_ids: Iterable[int]) -> dict[int, str | None]:
        """Run id -> the bench revision it ran, for each of `run_ids` that exists."""
        return {i: r.git_rev for i, r in self._runs.runs_of(run_ids).items()}

    def fingerprints(self, run_ids: Iterable[int]) -> dict[int, dict[str, dict[str, Any]]]:
        """Run id -> device -> fingerprint, for each of `run_ids` (empty for a run without any)."""
        ids = set(run_ids)
        out: dict[int, dict[str, dict[str, Any]]] = {i: {} for i in ids}
        for (run_id, device), fp in self._verdicts.fingerprints_of_runs(ids).items():
            out[run_id][device] = fp
        return out


def _device(record: RunRecord, name: str) -> DeviceRecord:
    """The record's device `name` (a figure of a device the run does not list gets a record of its own)."""
    if name not in record.devices:
        record.devices[name] = DeviceRecord(DeviceRow(record.run.id, name, "", "", "", {}), listed=False)
    return record.devices[name]

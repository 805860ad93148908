"""The history page's data: per session, the last N judged nights of every device and judged metric, read from
the stored figures only (measurements, verdicts, device outcomes, fingerprints; never frame records), so a year
of nights renders in well under a second (tests/bench/bench_history_page.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.alerts import table
from bench.alerts.model import FIXED, Alert
from bench.bundles.fingerprint import changes
from bench.results.thresholds import MetricRule, Thresholds
from bench.results.verdict import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, REGRESSION
from bench.store.results import ResultStore

HISTORY_NIGHTS = 60  # nights a cell of the history page shows
MARKED = (REGRESSION, NOT_REPRODUCED, INCONCLUSIVE)  # verdicts a cell marks on its point


@dataclass(frozen=True)
class Point:
    """One night of one device and metric: its stored figure and what the verdict said."""

    run_id: int
    started_at: str
    value: float | None
    status: str = ""  # the stored verdict's status ("" when the night has none for this metric)
    reason: str = ""
    drift_since: int | None = None


@dataclass
class Cell:
    """One device's series of one metric over the session's nights (oldest first, one entry per night)."""

    device: str
    rule: MetricRule
    unit: str
    points: list[Point]
    failures: dict[int, str] = field(default_factory=dict)  # run id -> why the device's part did not finish
    changes: dict[int, list[str]] = field(default_factory=dict)  # run id -> what changed against the night before
    alert: Alert | None = None  # the newest alert that lists this device's metric (bench.alerts)

    @property
    def not_applicable(self) -> str:
        """The reason when every judged night said "not applicable" (an icount guest's bench-clock figure)."""
        judged = [p for p in self.points if p.status]
        if judged and all(p.status == NOT_APPLICABLE for p in judged):
            return judged[-1].reason
        return ""

    @property
    def drifts(self) -> list[Point]:
        """The nights whose verdict was a confirmed drift."""
        return [p for p in self.points if p.drift_since is not None and p.status == REGRESSION]


@dataclass
class SessionGrid:
    """One session's nights and its device x metric cells."""

    session: str
    nights: list[tuple[int, str]]  # (run id, started at), oldest first
    devices: list[str]
    rules: list[MetricRule]
    cells: dict[tuple[str, str], Cell]  # (device, metric) -> cell
    alerts: list[Alert] = field(default_factory=list)  # the alerts not fixed listing a metric of the session, oldest
    # first (product failures' included; an alert of one cause lists metrics of every session it moved)
    untriaged_days: float = 3.0  # an alert untriaged for longer is flagged


def load_grids(store: ResultStore, thresholds: Thresholds, nights: int = HISTORY_NIGHTS) -> list[SessionGrid]:
    """Every session's grid over its last `nights` judged nights (runs with stored verdicts; confirm replays and the
    update-and-faults run have none), sessions by name."""
    by_session: dict[str, list[tuple[int, str]]] = {}
    for run_id, session, started in store.verdicts.judged_runs():
        by_session.setdefault(session, []).append((run_id, started))
    return [_grid(store, thresholds, session, shown[-nights:]) for session, shown in sorted(by_session.items())]


def _grid(store: ResultStore, thresholds: Thresholds, session: str, nights: list[tuple[int, str]]) -> SessionGrid:
    ids = [run_id for run_id, _ in nights]
    measures = {r.measurement for r in thresholds.rules}
    values = {
        (m.run_id, m.device, m.name): (m.value, m.unit) for m in store.measures.of_runs(ids) if m.name in measures
    }
    verdicts = {(v.run_id, v.device, v.metric): v.data for v in store.verdicts.verdicts_of_runs(ids)}
    failures: dict[str, dict[int, str]] = {}
    devices: set[str] = set()
    for d in store.runs.devices_of_runs(ids):
        devices.add(d.name)
        if d.status != "ok":
            failures.setdefault(d.name, {})[d.run_id] = f"{d.status}: {d.detail}" if d.detail else d.status
    prints: dict[str, dict[int, dict]] = {}
    for (run_id, device), fp in store.verdicts.fingerprints_of_runs(ids).items():
        prints.setdefault(device, {})[run_id] = fp
    changed = {device: _changes(by_run) for device, by_run in prints.items()}
    alerts = table.of_session(store, session)
    newest = {(a.device, m.metric): a for a in alerts for m in a.metrics if m.session == session}
    cells: dict[tuple[str, str], Cell] = {}
    rules = []
    for rule in thresholds.rules:
        row = {}
        for device in sorted(devices):
            points, unit = [], ""
            for run_id, started in nights:
                value, u = values.get((run_id, device, rule.measurement), (None, ""))
                unit = unit or u
                v = verdicts.get((run_id, device, rule.name), {})
                points.append(
                    Point(run_id, started, value, v.get("status", ""), v.get("reason", ""), v.get("drift_since"))
                )
            if any(p.value is not None or p.status == NOT_APPLICABLE for p in points):
                row[(device, rule.name)] = Cell(
                    device, rule, unit, points, failures.get(device, {}), changed.get(device, {}),
                    newest.get((device, rule.name)),
                )  # fmt: skip
        if any(c.not_applicable == "" for c in row.values()):  # a metric no device has a figure of is left out
            rules.append(rule)
            cells.update(row)
    open_alerts = [a for a in alerts if a.state != FIXED]
    return SessionGrid(session, nights, sorted(devices), rules, cells, open_alerts, thresholds.alerts.untriaged_days)


def _changes(by_run: dict[int, dict]) -> dict[int, list[str]]:
    out, before = {}, None
    for run_id, fp in sorted(by_run.items()):
        if before is not None:
            what = changes(fp, before)
            if what:
                out[run_id] = what
        before = fp
    return out

"""The history page's data: per session, the last N judged nights of every device and judged metric, read from
the stored figures only (measurements, verdicts, device outcomes, fingerprints; never frame records), so a year
of nights renders in well under a second (tests/bench/bench_history_page.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.alerts import Alert, table
from bench.alerts.model import FIXED
from bench.bundles.fingerprint import changes
from bench.results.thresholds import MetricRule, Thresholds
from bench.results.verdict import INCONCLUSIVE, NOT_APPLICABLE, NOT_REPRODUCED, REGRESSION
from bench.store import stored
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
    alert: Alert | None = None  # the newest alert of this device and metric (bench.alerts)

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
    alerts: list[Alert] = field(default_factory=list)  # the session's alerts not fixed, product failures' included
    untriaged_days: float = 3.0  # an alert untriaged for longer is flagged


def load_grids(store: ResultStore, thresholds: Thresholds, nights: int = HISTORY_NIGHTS) -> list[SessionGrid]:
    """Every session's grid over its last `nights` judged nights (runs with stored verdicts; confirm replays and the
    update-and-faults run have none), sessions by name."""
    db = store.db
    rows = db.execute(
        "SELECT r.id, COALESCE(r.session, ''), r.started_at FROM runs r"
        " WHERE r.id IN (SELECT DISTINCT run_id FROM verdicts) ORDER BY r.id"
    ).fetchall()
    by_session: dict[str, list[tuple[int, str]]] = {}
    for run_id, session, started in rows:
        by_session.setdefault(session, []).append((int(run_id), started))
    grids = []
    for session, all_nights in sorted(by_session.items()):
        shown = all_nights[-nights:]
        grids.append(_grid(store, thresholds, session, shown))
    return grids


def _grid(store: ResultStore, thresholds: Thresholds, session: str, nights: list[tuple[int, str]]) -> SessionGrid:
    ids = [run_id for run_id, _ in nights]
    marks = ",".join("?" * len(ids))
    db = store.db
    measures = {r.measurement for r in thresholds.rules}
    values: dict[tuple[int, str, str], tuple[float | None, str]] = {}
    for run_id, device, name, unit, value in db.execute(
        f"SELECT run_id, device, name, unit, value FROM measurements WHERE run_id IN ({marks})", ids
    ):
        if name in measures:
            values[(run_id, device, name)] = (value, unit)
    verdicts: dict[tuple[int, str, str], dict] = {}
    for run_id, device, metric, data in db.execute(
        f"SELECT run_id, device, metric, data FROM verdicts WHERE run_id IN ({marks})", ids
    ):
        where = f"({run_id}, {device!r}, {metric!r})"
        verdicts[(run_id, device, metric)] = stored.json_object(data, store.label, "verdicts", where, "data")
    failures: dict[str, dict[int, str]] = {}
    devices: set[str] = set()
    for run_id, device, status, detail in db.execute(
        f"SELECT run_id, name, status, detail FROM devices WHERE run_id IN ({marks})", ids
    ):
        devices.add(device)
        if status != "ok":
            failures.setdefault(device, {})[run_id] = f"{status}: {detail}" if detail else status
    prints: dict[str, dict[int, dict]] = {}
    for run_id, device, data in db.execute(
        f"SELECT run_id, device, data FROM fingerprints WHERE run_id IN ({marks}) ORDER BY run_id", ids
    ):
        where = f"({run_id}, {device!r})"
        prints.setdefault(device, {})[run_id] = stored.json_object(data, store.label, "fingerprints", where, "data")
    changed = {device: _changes(by_run) for device, by_run in prints.items()}
    newest = {(a.device, a.metric): a for a in table.of_session(store, session)}
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
    open_alerts = sorted((a for a in newest.values() if a.state != FIXED), key=lambda a: a.id)
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

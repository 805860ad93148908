"""Baseline windows, kept with the results: which device runs were accepted into later baselines and why not
(table `baseline_members`), the accepted values a verdict compares with, and named baselines (table
`baselines`: a name pointing at a run, `hilbench baseline set`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from bench.store.database import Database

DEFAULT_BASELINE = "default"  # the named baseline a nightly compares with unless told another
DRIFT_WHY = "drift: "  # how a night that belongs to a detected drift says why it left the baseline window
# the run kinds of a pre-merge check's replays (the candidate's and the baseline build's): judged against each other
# only, never part of a nightly's window or drift series, whatever their baseline membership says
CHECK_KIND, CHECK_BASELINE_KIND = "check", "check-baseline"
_NOT_CHECKS = f" AND r.kind NOT IN ('{CHECK_KIND}', '{CHECK_BASELINE_KIND}')"
_ACCEPTED_VALUES = (
    "SELECT m.run_id, m.value FROM measurements m"
    " JOIN baseline_members b ON b.run_id = m.run_id AND b.device = m.device"
    " JOIN runs r ON r.id = m.run_id"
)
_BASELINES = (
    "CREATE TABLE IF NOT EXISTS baselines ("
    " name TEXT PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), set_at TEXT NOT NULL)"
)

Values = list[tuple[int, float]]  # (run id, value), oldest first


@dataclass(frozen=True)
class Baseline:
    """A named pointer to a run."""

    name: str
    run_id: int
    set_at: str


class WindowStore:
    """Baseline membership, the values of baseline windows and drift series, and named baselines."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def accept(self, run_id: int, device: str, accepted: bool, why: str = "") -> None:
        """Whether `device`'s part of run `run_id` joins later baseline windows, and why not."""
        self.db.execute(
            "INSERT OR REPLACE INTO baseline_members VALUES (?, ?, ?, ?)", (run_id, device, int(accepted), why)
        )

    def membership(self, run_id: int) -> dict[str, tuple[bool, str]]:
        """device -> (accepted, why) for a run."""
        rows = self.db.execute("SELECT device, accepted, why FROM baseline_members WHERE run_id = ?", (run_id,))
        return {device: (bool(accepted), why) for device, accepted, why in rows.fetchall()}

    def accepted(
        self, session: str, device: str, measurement: str, *, last: int, inclusive: bool, limit: int
    ) -> Values:
        """The last `limit` accepted runs of `session` on `device` before run `last` (or up to and including it)
        that have `measurement`, with its values; never a pre-merge check's runs."""
        op = "<=" if inclusive else "<"
        rows = self.db.execute(
            _ACCEPTED_VALUES + " WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND b.accepted = 1"
            f" AND m.run_id {op} ? AND m.value IS NOT NULL{_NOT_CHECKS} ORDER BY m.run_id DESC LIMIT ?",
            (device, measurement, session, last, limit),
        ).fetchall()
        return _oldest_first(rows)

    def of_runs(self, device: str, measurement: str, runs: tuple[int, ...]) -> Values:
        """The values of `measurement` on `device` in exactly `runs` (those that have it), oldest first."""
        marks = ", ".join("?" for _ in runs) or "NULL"
        rows = self.db.execute(
            f"SELECT run_id, value FROM measurements WHERE device = ? AND name = ? AND run_id IN ({marks})"
            " AND value IS NOT NULL ORDER BY run_id DESC",
            (device, measurement, *runs),
        ).fetchall()
        return _oldest_first(rows)

    def series(self, session: str, device: str, measurement: str, *, before: int, limit: int) -> Values:
        """The last `limit` judged nights of `session` on `device` before run `before` that have `measurement`: the
        accepted ones and those that left the window for belonging to a drift (a step regression's nights stay
        out). The series a drift is looked for in (bench.results.drift)."""
        rows = self.db.execute(
            _ACCEPTED_VALUES + " WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND m.run_id < ?"
            f" AND (b.accepted = 1 OR b.why LIKE ?) AND m.value IS NOT NULL{_NOT_CHECKS}"
            " ORDER BY m.run_id DESC LIMIT ?",
            (device, measurement, session, before, DRIFT_WHY + "%", limit),
        ).fetchall()
        return _oldest_first(rows)

    def flagged(
        self, session: str, device: str, metric: str, measurement: str, status: str, *, after: int, before: int,
        limit: int,
    ) -> Values:  # fmt: skip
        """The nights of `session` on `device` after run `after` and before run `before` whose stored verdict on
        `metric` has `status`, or that left the window for belonging to a drift, with their `measurement`, at most
        the last `limit`: a regression's nights so far (bench.results.drift.find_creep)."""
        rows = self.db.execute(
            _ACCEPTED_VALUES + " LEFT JOIN verdicts v ON v.run_id = m.run_id AND v.device = m.device AND v.metric = ?"
            " WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND m.run_id > ? AND m.run_id < ?"
            f" AND (v.status = ? OR b.why LIKE ?) AND m.value IS NOT NULL{_NOT_CHECKS}"
            " ORDER BY m.run_id DESC LIMIT ?",
            (metric, device, measurement, session, after, before, status, DRIFT_WHY + "%", limit),
        ).fetchall()
        return _oldest_first(rows)

    def leave_window(self, session: str, device: str, since: int, up_to: int, why: str) -> int:
        """Take the nights of `session` on `device` from run `since` to `up_to` (both included) out of later
        baseline windows: they belong to a drift, and a window that held them would absorb it. How many left."""
        cur = self.db.execute(
            "UPDATE baseline_members SET accepted = 0, why = ? WHERE device = ? AND run_id BETWEEN ? AND ?"
            " AND run_id IN (SELECT id FROM runs WHERE COALESCE(session, '') = ?)",
            (DRIFT_WHY + why, device, since, up_to, session),
        )
        return cur.rowcount

    def set_named(self, name: str, run_id: int) -> Baseline:
        """Make run `run_id` the baseline called `name` (replacing the old one)."""
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.db.execute(_BASELINES)
        self.db.execute("INSERT OR REPLACE INTO baselines (name, run_id, set_at) VALUES (?, ?, ?)", (name, run_id, now))
        return Baseline(name, run_id, now)

    def named(self, name: str = DEFAULT_BASELINE) -> Baseline | None:
        """The baseline called `name`, or None when none is set."""
        self.db.execute(_BASELINES)
        row = self.db.execute("SELECT name, run_id, set_at FROM baselines WHERE name = ?", (name,)).fetchone()
        return Baseline(*row) if row else None

    def all_named(self) -> list[Baseline]:
        """Every named baseline, by name."""
        self.db.execute(_BASELINES)
        return [Baseline(*r) for r in self.db.execute("SELECT name, run_id, set_at FROM baselines ORDER BY name")]


def _oldest_first(rows: list) -> Values:
    return [(int(run_id), float(value)) for run_id, value in reversed(rows)]

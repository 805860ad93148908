"""What a verdict rests on, kept with the results: the bench host's noise per run, each device's
fingerprint, the verdicts themselves, and which device runs were accepted into later baselines.

Tables `run_host`, `fingerprints`, `verdicts` and `baseline_members` (bench.store.schema)."""

from __future__ import annotations

import json
from typing import Any

from bench.results.verdict import REGRESSION, Verdict, Window
from bench.store import stored
from bench.store.results import ResultStore

HISTORY_RUNS = 20  # accepted runs whose spread a verdict may use when it is wider than the window's
DRIFT_WHY = "drift: "  # how a night that belongs to a detected drift says why it left the baseline window
# the run kinds of a pre-merge check's replays (the candidate's and the baseline build's): judged against each other
# only, never part of a nightly's window or drift series, whatever their baseline membership says
CHECK_KIND, CHECK_BASELINE_KIND = "check", "check-baseline"
_NOT_CHECKS = f" AND r.kind NOT IN ('{CHECK_KIND}', '{CHECK_BASELINE_KIND}')"


def record_host(store: ResultStore, run_id: int, noise: dict[str, Any]) -> None:
    """The bench host's identity and noise during run `run_id`."""
    store.db.execute("INSERT OR REPLACE INTO run_host VALUES (?, ?)", (run_id, json.dumps(noise)))


def host_of(store: ResultStore, run_id: int) -> dict[str, Any] | None:
    """The stored host noise of a run, or None."""
    row = store.db.execute("SELECT data FROM run_host WHERE run_id = ?", (run_id,)).fetchone()
    return stored.json_object(row[0], store.label, "run_host", run_id, "data") if row else None


def record_fingerprint(store: ResultStore, run_id: int, device: str, fingerprint: dict[str, Any]) -> None:
    """What ran on `device` in run `run_id`."""
    store.db.execute("INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?)", (run_id, device, json.dumps(fingerprint)))


def fingerprints(store: ResultStore, run_id: int) -> dict[str, dict[str, Any]]:
    """device -> fingerprint of a run."""
    rows = store.db.execute("SELECT device, data FROM fingerprints WHERE run_id = ?", (run_id,))
    return {
        device: stored.json_object(data, store.label, "fingerprints", f"({run_id}, {device!r})", "data")
        for device, data in rows.fetchall()
    }


def record_verdicts(store: ResultStore, run_id: int, verdicts: list[Verdict]) -> None:
    """The final verdicts of a run (replacing earlier ones of the same device and metric)."""
    rows = [(run_id, v.device, v.metric, v.status, json.dumps(v.to_dict())) for v in verdicts]
    store.db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", rows)


def stored_verdicts(store: ResultStore, run_id: int) -> list[Verdict]:
    """The verdicts recorded for a run (empty when it was never judged)."""
    rows = store.db.execute(
        "SELECT device, metric, data FROM verdicts WHERE run_id = ? ORDER BY device, metric", (run_id,)
    )
    out = []
    for device, metric, data in rows.fetchall():
        where = f"({run_id}, {device!r}, {metric!r})"
        fields = stored.json_object(data, store.label, "verdicts", where, "data")
        try:
            fields["baseline_runs"] = tuple(fields.get("baseline_runs") or ())
            out.append(Verdict(**fields))
        except TypeError as exc:
            raise stored.DamagedStore(
                f"results store {store.label}: table verdicts, row {where}, field data: not a verdict ({exc})",
                file=str(store.label),
                field="verdicts.data",
            ) from None
    return out


def accept(store: ResultStore, run_id: int, device: str, accepted: bool, why: str = "") -> None:
    """Whether `device`'s part of run `run_id` joins later baseline windows, and why not."""
    store.db.execute(
        "INSERT OR REPLACE INTO baseline_members VALUES (?, ?, ?, ?)", (run_id, device, int(accepted), why)
    )


def membership(store: ResultStore, run_id: int) -> dict[str, tuple[bool, str]]:
    """device -> (accepted, why) for a run."""
    rows = store.db.execute("SELECT device, accepted, why FROM baseline_members WHERE run_id = ?", (run_id,))
    return {device: (bool(accepted), why) for device, accepted, why in rows.fetchall()}


def window(
    store: ResultStore,
    session: str,
    device: str,
    measurement: str,
    *,
    before: int,
    size: int,
    pinned: int | None,
    only: tuple[int, ...] | None = None,
) -> Window:
    """The last `size` accepted runs of `session` on `device` before run `before` (or up to and including the
    `pinned` run) that have `measurement`, with its values, oldest first; plus the values of the last
    HISTORY_RUNS such runs (the spread of a heavy-tailed figure needs more than five). A pre-merge check's runs
    are never in it. With `only`, the window is those runs (a check's baseline replays), accepted or not."""
    if only is not None:
        return _runs_window(store, device, measurement, only)
    last, op = (pinned, "<=") if pinned is not None else (before, "<")
    rows = store.db.execute(
        "SELECT m.run_id, m.value FROM measurements m"
        " JOIN baseline_members b ON b.run_id = m.run_id AND b.device = m.device"
        " JOIN runs r ON r.id = m.run_id"
        f" WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND b.accepted = 1 AND m.run_id {op} ?"
        f" AND m.value IS NOT NULL{_NOT_CHECKS} ORDER BY m.run_id DESC LIMIT ?",
        (device, measurement, session, last, max(size, HISTORY_RUNS)),
    ).fetchall()
    rows.reverse()
    recent = rows[-size:]
    history = tuple(float(r[1]) for r in rows) if len(rows) > size else ()
    return Window(tuple(int(r[0]) for r in recent), tuple(float(r[1]) for r in recent), size, pinned, history)


def _runs_window(store: ResultStore, device: str, measurement: str, runs: tuple[int, ...]) -> Window:
    """The window of exactly `runs` (those that have `measurement` on `device`), oldest first."""
    marks = ", ".join("?" for _ in runs)
    rows = store.db.execute(
        f"SELECT run_id, value FROM measurements WHERE device = ? AND name = ? AND run_id IN ({marks})"
        " AND value IS NOT NULL ORDER BY run_id",
        (device, measurement, *runs),
    ).fetchall()
    return Window(tuple(int(r[0]) for r in rows), tuple(float(r[1]) for r in rows), len(runs))


def series(
    store: ResultStore, session: str, device: str, measurement: str, *, before: int, limit: int
) -> tuple[list[int], list[float]]:
    """The last `limit` judged nights of `session` on `device` before run `before` that have `measurement`: the
    accepted ones and those that left the window for belonging to a drift (a step regression's nights stay out),
    as (run ids, values), oldest first. The series a drift is looked for in (bench.results.drift)."""
    rows = store.db.execute(
        "SELECT m.run_id, m.value FROM measurements m"
        " JOIN baseline_members b ON b.run_id = m.run_id AND b.device = m.device"
        " JOIN runs r ON r.id = m.run_id"
        " WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND m.run_id < ?"
        f" AND (b.accepted = 1 OR b.why LIKE ?) AND m.value IS NOT NULL{_NOT_CHECKS} ORDER BY m.run_id DESC LIMIT ?",
        (device, measurement, session, before, DRIFT_WHY + "%", limit),
    ).fetchall()
    rows.reverse()
    return [int(r[0]) for r in rows], [float(r[1]) for r in rows]


def regression_nights(
    store: ResultStore, session: str, device: str, metric: str, measurement: str, *, after: int, before: int, limit: int
) -> tuple[list[int], list[float]]:
    """The nights of `session` on `device` after run `after` (the newest run of the window they were judged
    against) and before run `before` whose stored verdict on `metric` is a regression, or that left the window for
    belonging to a drift, with their `measurement`, as (run ids, values), oldest first, at most the last `limit`:
    a regression's nights so far, the nights a creep is looked for in (bench.results.drift.find_creep)."""
    rows = store.db.execute(
        "SELECT m.run_id, m.value FROM measurements m"
        " JOIN baseline_members b ON b.run_id = m.run_id AND b.device = m.device"
        " JOIN runs r ON r.id = m.run_id"
        " LEFT JOIN verdicts v ON v.run_id = m.run_id AND v.device = m.device AND v.metric = ?"
        " WHERE m.device = ? AND m.name = ? AND COALESCE(r.session, '') = ? AND m.run_id > ? AND m.run_id < ?"
        f" AND (v.status = ? OR b.why LIKE ?) AND m.value IS NOT NULL{_NOT_CHECKS} ORDER BY m.run_id DESC LIMIT ?",
        (metric, device, measurement, session, after, before, REGRESSION, DRIFT_WHY + "%", limit),
    ).fetchall()
    rows.reverse()
    return [int(r[0]) for r in rows], [float(r[1]) for r in rows]


def leave_window(store: ResultStore, session: str, device: str, since: int, up_to: int, why: str) -> int:
    """Take the nights of `session` on `device` from run `since` to `up_to` (both included) out of later baseline
    windows: they belong to a drift, and a window that held them would absorb it. Returns how many left."""
    cur = store.db.execute(
        "UPDATE baseline_members SET accepted = 0, why = ? WHERE device = ? AND run_id BETWEEN ? AND ?"
        " AND run_id IN (SELECT id FROM runs WHERE COALESCE(session, '') = ?)",
        (DRIFT_WHY + why, device, since, up_to, session),
    )
    return cur.rowcount

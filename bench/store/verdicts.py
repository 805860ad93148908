"""What a verdict rests on, kept with the results: the bench host's noise per run, each device's
fingerprint and the verdicts themselves (tables `run_host`, `fingerprints`, `verdicts`, bench.store.schema).
Verdicts are stored as their JSON form; bench.results.evidence turns them back into `Verdict`s."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.store import stored
from bench.store.database import Database


@dataclass(frozen=True)
class VerdictRow:
    """One stored verdict: its key and its JSON fields."""

    run_id: int
    device: str
    metric: str
    status: str
    data: dict[str, Any]


class VerdictStore:
    """Host noise, fingerprints and verdicts per run."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record_host(self, run_id: int, noise: dict[str, Any]) -> None:
        """The bench host's identity and noise during run `run_id`."""
        self.db.execute("INSERT OR REPLACE INTO run_host VALUES (?, ?)", (run_id, json.dumps(noise)))

    def host_of(self, run_id: int) -> dict[str, Any] | None:
        """The stored host noise of a run, or None."""
        row = self.db.execute("SELECT data FROM run_host WHERE run_id = ?", (run_id,)).fetchone()
        return stored.json_object(row[0], self.db.label, "run_host", run_id, "data") if row else None

    def record_fingerprint(self, run_id: int, device: str, fingerprint: dict[str, Any]) -> None:
        """What ran on `device` in run `run_id`."""
        self.db.execute(
            "INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?)", (run_id, device, json.dumps(fingerprint))
        )

    def fingerprints(self, run_id: int) -> dict[str, dict[str, Any]]:
        """device -> fingerprint of a run."""
        return {device: fp for (_, device), fp in self.fingerprints_of_runs([run_id]).items()}

    def fingerprints_of_runs(self, run_ids: Iterable[int]) -> dict[tuple[int, str], dict[str, Any]]:
        """(run id, device) -> fingerprint of runs `run_ids`, by run."""
        ids = list(run_ids)
        rows = self.db.execute(
            f"SELECT run_id, device, data FROM fingerprints WHERE run_id IN ({_marks(ids)}) ORDER BY run_id", ids
        )
        return {
            (run_id, device): stored.json_object(data, self.db.label, "fingerprints", f"({run_id}, {device!r})", "data")
            for run_id, device, data in rows.fetchall()
        }

    def record_verdicts(self, run_id: int, verdicts: Iterable[tuple[str, str, str, dict[str, Any]]]) -> None:
        """The final verdicts of a run as (device, metric, status, JSON fields), replacing earlier ones of the
        same device and metric."""
        rows = [(run_id, device, metric, status, json.dumps(data)) for device, metric, status, data in verdicts]
        self.db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", rows)

    def verdicts(self, run_id: int) -> list[VerdictRow]:
        """The verdicts recorded for a run, by device and metric (empty when it was never judged)."""
        return self.verdicts_of_runs([run_id])

    def verdicts_of_runs(self, run_ids: Iterable[int]) -> list[VerdictRow]:
        """The verdicts recorded for runs `run_ids`, by run, device and metric."""
        ids = list(run_ids)
        rows = self.db.execute(
            f"SELECT run_id, device, metric, status, data FROM verdicts WHERE run_id IN ({_marks(ids)})"
            " ORDER BY run_id, device, metric",
            ids,
        )
        return [
            VerdictRow(
                run_id, device, metric, status,
                stored.json_object(data, self.db.label, "verdicts", f"({run_id}, {device!r}, {metric!r})", "data"),
            )
            for run_id, device, metric, status, data in rows.fetchall()
        ]  # fmt: skip

    def judged_runs(self) -> list[tuple[int, str, str]]:
        """(run id, session or "", started at) of every run with stored verdicts, oldest first."""
        rows = self.db.execute(
            "SELECT r.id, COALESCE(r.session, ''), r.started_at FROM runs r"
            " WHERE r.id IN (SELECT DISTINCT run_id FROM verdicts) ORDER BY r.id"
        ).fetchall()
        return [(int(run_id), session, started) for run_id, session, started in rows]


def _marks(ids: list[int]) -> str:
    """The placeholders of an IN list (NULL for an empty one, which matches nothing)."""
    return ", ".join("?" for _ in ids) or "NULL"

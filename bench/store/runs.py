"""Runs and the devices in them (tables `runs` and `devices`, bench.store.schema).

Each run records the process that writes it (host, pid, start time); a run left `running` by a process that
is gone is marked `interrupted` by the next bench command on that host that opens the store."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.core.errors import ConfigError
from bench.core.leases import process_start
from bench.store import stored
from bench.store.database import Database
from bench.store.frames import FrameStore

UPDATE_RUN_KIND = "ota"  # the nightly's model updates and fault cases: a run without performance figures


@dataclass(frozen=True)
class RunRow:
    """One run."""

    id: int
    kind: str
    bench: str
    started_at: str
    finished_at: str | None
    status: str  # running (or killed), ok, failed, interrupted
    session: str | None
    speed: float | None
    git_rev: str | None
    config: dict[str, Any]
    summary: dict[str, Any]


@dataclass(frozen=True)
class DeviceRow:
    """One device's part in a run."""

    run_id: int
    name: str
    kind: str
    status: str
    detail: str
    info: dict[str, Any]


def now() -> str:
    """Now, ISO-8601 UTC to the millisecond (the runs' timestamps)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class RunStore:
    """Runs and their devices; finishing a run packs its frame records (`frames`)."""

    def __init__(self, db: Database, frames: FrameStore) -> None:
        self.db = db
        self._frames = frames

    def begin_run(
        self,
        kind: str,
        *,
        bench: str = "",
        session: str | None = None,
        speed: float | None = None,
        git_rev: str | None = None,
        config: dict[str, Any] | None = None,
        started_at: str | None = None,
    ) -> int:
        """Start a run (status `running`; its summary names the process writing it until it finishes).
        `started_at` (ISO-8601 UTC, default now) is for runs imported or written after the fact."""
        pid = os.getpid()
        owner = {"owner": {"host": socket.gethostname(), "pid": pid, "pid_start": process_start(pid)}}
        cur = self.db.execute(
            "INSERT INTO runs (kind, bench, started_at, status, session, speed, git_rev, config, summary)"
            " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?) RETURNING id",
            (kind, bench, started_at or now(), session, speed, git_rev, json.dumps(config or {}, default=str),
             json.dumps(owner)),
        )  # fmt: skip
        return int(cur.fetchall()[0][0])  # fetch all: a pending RETURNING statement would hold the write lock

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None = None) -> None:
        """Mark a run finished with `status` (ok, failed, interrupted) and a JSON summary; its frame records are
        packed (one row per device). A device of the run still `running` (its command was stopped before it
        could say how the device ended, e.g. by a second Ctrl-C) becomes `interrupted` with it."""
        self._frames.pack(run_id)
        with self.db.tx():
            self.db.execute(
                "UPDATE devices SET status = 'interrupted' WHERE run_id = ? AND status = 'running'", (run_id,)
            )
            self.db.execute(
                "UPDATE runs SET finished_at = ?, status = ?, summary = ? WHERE id = ?",
                (now(), status, json.dumps(summary or {}, default=str), run_id),
            )

    def close_orphaned(self) -> list[int]:
        """Mark `interrupted` the runs still `running` whose writer (a process on this host) is gone."""
        host = socket.gethostname()
        closed = []
        for run_id, summary in self.db.execute("SELECT id, summary FROM runs WHERE status = 'running'").fetchall():
            owner = stored.json_object(summary, self.db.label, "runs", run_id, "summary").get("owner") or {}
            pid = owner.get("pid") if isinstance(owner, dict) else None
            if not isinstance(pid, int) or owner.get("host") != host or process_start(pid) == owner.get("pid_start"):
                continue
            self.db.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = ?, summary = ? WHERE id = ? AND status = ?",
                (now(), json.dumps({"interrupted": f"its process {owner.get('pid')} ended"}), run_id, "running"),
            )
            self.db.execute(
                "UPDATE devices SET status = 'interrupted' WHERE run_id = ? AND status = 'running'", (run_id,)
            )
            self._frames.pack(run_id)
            closed.append(int(run_id))
        return closed

    def add_device(self, run_id: int, name: str, kind: str, info: dict[str, Any] | None = None) -> None:
        """Register a device in a run (status `running`)."""
        self.db.execute(
            "INSERT OR REPLACE INTO devices (run_id, name, kind, info) VALUES (?, ?, ?, ?)",
            (run_id, name, kind, json.dumps(info or {}, default=str)),
        )

    def update_device(
        self, run_id: int, name: str, *, status: str | None = None, detail: str | None = None, **info: Any
    ) -> None:
        """Set a device's status/detail and merge `info` keys into its info."""
        row = self.db.execute("SELECT info FROM devices WHERE run_id = ? AND name = ?", (run_id, name)).fetchone()
        where = f"({run_id}, {name!r})"
        merged = {**stored.json_object(row[0], self.db.label, "devices", where, "info"), **info} if row else info
        self.db.execute(
            "UPDATE devices SET status = COALESCE(?, status), detail = COALESCE(?, detail), info = ?"
            " WHERE run_id = ? AND name = ?",
            (status, detail, json.dumps(merged, default=str), run_id, name),
        )

    def latest(self, *, kind: str | None = None, limit: int | None = None) -> list[RunRow]:
        """Runs, newest first."""
        sql = "SELECT * FROM runs" + (" WHERE kind = ?" if kind else "") + " ORDER BY id DESC"
        params: list[Any] = [kind] if kind else []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [self._run(r) for r in self.db.execute(sql, params)]

    def run(self, run_id: int) -> RunRow:
        """One run (ConfigError naming the store when it does not exist)."""
        row = self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ConfigError(f"results store {self.db.label}: no run {run_id}")
        return self._run(row)

    def devices(self, run_id: int) -> list[DeviceRow]:
        """The devices of a run, by name."""
        return self.devices_of_runs([run_id])

    def devices_of_runs(self, run_ids: Iterable[int]) -> list[DeviceRow]:
        """The devices of runs `run_ids`, by run and name."""
        ids = list(run_ids)
        marks = ", ".join("?" for _ in ids) or "NULL"
        rows = self.db.execute(f"SELECT * FROM devices WHERE run_id IN ({marks}) ORDER BY run_id, name", ids)
        return [
            DeviceRow(r[0], r[1], r[2], r[3], r[4],
                      stored.json_object(r[5], self.db.label, "devices", f"({r[0]}, {r[1]!r})", "info"))
            for r in rows
        ]  # fmt: skip

    def runs_of(self, run_ids: Iterable[int]) -> dict[int, RunRow]:
        """Run id -> run, of those of `run_ids` that exist."""
        ids = list(run_ids)
        marks = ", ".join("?" for _ in ids) or "NULL"
        return {r[0]: self._run(r) for r in self.db.execute(f"SELECT * FROM runs WHERE id IN ({marks})", ids)}

    def nights(self, session: str, after: int, up_to: int) -> int:
        """Nights of `session` (its nightly runs: replays and update-and-faults runs, not their confirm, retry or
        attribution replays) after run `after` up to and including run `up_to`."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM runs WHERE COALESCE(session, '') = ? AND id > ? AND id <= ? AND kind IN (?, ?)",
            (session, after, up_to, "replay", UPDATE_RUN_KIND),
        ).fetchone()
        return int(row[0] or 0)

    def first_started(self, device: str) -> str | None:
        """When the first run `device` took part in started, or None."""
        return self.db.execute(
            "SELECT MIN(r.started_at) FROM runs r JOIN devices d ON d.run_id = r.id WHERE d.name = ?", (device,)
        ).fetchone()[0]

    def _run(self, r: tuple) -> RunRow:
        config = stored.json_object(r[9], self.db.label, "runs", r[0], "config")
        summary = stored.json_object(r[10], self.db.label, "runs", r[0], "summary")
        speed = stored.number(r[7], self.db.label, "runs", r[0], "speed")
        return RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], speed, r[8], config, summary)

"""The results store: SQLite (one file per bench host; the default) or PostgreSQL (a `postgresql://` URL:
one history that several bench hosts write at once). Same API and schema; the SQL dialect differences
live in bench.store.dialect.

Writes commit as they happen (WAL journal on SQLite), so a run that is killed keeps every frame record
and measurement written before the kill. Each run records the process that writes it (host, pid, start
time); a run left `running` by a process that is gone is marked `interrupted` by the next bench command
on that host that opens the store."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import socket
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.agent.frame import Frame
from bench.core.errors import ConfigError
from bench.core.leases import process_start
from bench.core.paths import DEFAULT_STORE
from bench.measure.catalogue import metric
from bench.measure.faults import FaultEvent
from bench.measure.histogram import Histogram
from bench.measure.measurement import Measurement
from bench.store import stored
from bench.store.dialect import (
    PostgresConnection,
    connect_sqlite,
    database_size,
    is_postgres,
    reclaim_space,
    reuse_deleted,
)
from bench.store.frame_columns import FIELDS, PACKED, FrameColumns, empty
from bench.store.frame_writer import BackgroundFrameWriter
from bench.store.packed import NONE, pack, unpack
from bench.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES

UPDATE_RUN_KIND = "ota"  # the nightly's model updates and fault cases: a run without performance figures
RAW_TABLES = ["frames", "frame_packs", "inputs", "input_sends"]  # the frame and input rows retention prunes


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


@dataclass(frozen=True)
class MeasurementRow:
    """One stored measurement."""

    run_id: int
    device: str
    name: str
    unit: str
    value: float | None
    low: float | None
    high: float | None
    marginal_low: float | None
    marginal_high: float | None
    outcome: str
    samples: int | None
    flags: tuple[str, ...]
    description: str


_REALS = ("value", "low", "high", "marginal_low", "marginal_high")  # the REAL columns of a measurement


def _redacted(url: str) -> str:
    """A URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def _rule(name: str) -> str:
    """The metric catalogue's rule for measurement `name` ("" for a name it does not have)."""
    try:
        return metric(name).rule
    except KeyError:
        return ""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def open_store(location: str | Path | None = None) -> ResultStore:
    """The store at `location`: a file path, `sqlite:///path` or `postgresql://user@host/db`
    (default reports/results.sqlite)."""
    loc = str(location) if location is not None else str(DEFAULT_STORE)
    if loc.startswith("sqlite:///"):
        loc = loc[len("sqlite:///") :]  # sqlite:///relative or sqlite:////absolute
    elif is_postgres(loc):
        return ResultStore(loc)
    elif "://" in loc:
        scheme = loc.split("://", 1)[0]
        raise ConfigError(
            f"results store {location!r}: scheme {scheme!r} is not supported",
            hint="use a file path, sqlite:///path or postgresql://user@host/database",
        )
    return ResultStore(Path(loc))


_META = "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)"


class ResultStore:
    """Runs and everything measured in them, in one SQLite file or one PostgreSQL database.

    `path` is the SQLite file, or the PostgreSQL URL (a str) that `open_store` was given."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        try:
            if isinstance(path, str) and is_postgres(path):
                self.db: Any = PostgresConnection(path, TABLES, _META, (str(SCHEMA_VERSION),))
            else:
                self.path = Path(path)
                self.db = connect_sqlite(self.path, TABLES, _META, (str(SCHEMA_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(f"results store {path}: cannot open: {exc}", hint="check the path (--results)") from None
        except Exception as exc:  # psycopg.Error (imported lazily): server down, no such database, no access
            if type(exc).__module__.split(".")[0] != "psycopg":
                raise
            raise ConfigError(
                f"results store {_redacted(str(path))}: cannot open: {str(exc).strip()}",
                hint="check the URL (--results or [bench] results) and that the PostgreSQL server runs",
            ) from None
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = stored.integer(row[0] if row else None, self.label, "meta", "'schema_version'", "value", low=1)
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"results store {path}: schema version {version}, this bench writes {SCHEMA_VERSION}",
                hint="update this bench host's checkout: another host's newer bench migrated the store",
            )
        self._migrate(version)
        self.interrupted_runs = self._close_orphaned_runs()

    def _migrate(self, version: int) -> None:
        """Bring a store written by an older bench to SCHEMA_VERSION, one version at a time (each step's statements
        are idempotent, and the version moves on only from the one it was: two hosts opening it at once agree)."""
        for step in range(version, SCHEMA_VERSION):
            with self._tx():
                for statement in MIGRATIONS.get(step, []):
                    self.db.execute(statement)
                self.db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version' AND value = ?", (str(step + 1), str(step))
                )

    def _close_orphaned_runs(self) -> list[int]:
        """Mark `interrupted` the runs still `running` whose writer (a process on this host) is gone."""
        host = socket.gethostname()
        closed = []
        for run_id, summary in self.db.execute("SELECT id, summary FROM runs WHERE status = 'running'").fetchall():
            owner = stored.json_object(summary, self.label, "runs", run_id, "summary").get("owner") or {}
            pid = owner.get("pid") if isinstance(owner, dict) else None
            if not isinstance(pid, int) or owner.get("host") != host or process_start(pid) == owner.get("pid_start"):
                continue
            self.db.execute(
                "UPDATE runs SET status = 'interrupted', finished_at = ?, summary = ? WHERE id = ? AND status = ?",
                (_now(), json.dumps({"interrupted": f"its process {owner.get('pid')} ended"}), run_id, "running"),
            )
            self.db.execute(
                "UPDATE devices SET status = 'interrupted' WHERE run_id = ? AND status = 'running'", (run_id,)
            )
            self._pack_frames(run_id)
            closed.append(int(run_id))
        return closed

    @property
    def label(self) -> str:
        """The store as error messages name it (a PostgreSQL URL without its password)."""
        return _redacted(str(self.path)) if isinstance(self.path, str) else str(self.path)

    @property
    def local_dir(self) -> Path | None:
        """The folder of a SQLite store (logs go next to it); None for a database server."""
        return self.path.parent if isinstance(self.path, Path) else None

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        """One transaction: committed on success, rolled back on error."""
        self.db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- writing -----------------------------------------------------------------------------------

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
            (
                kind,
                bench,
                started_at or _now(),
                session,
                speed,
                git_rev,
                json.dumps(config or {}, default=str),
                json.dumps(owner),
            ),
        )
        return int(cur.fetchall()[0][0])  # fetch all: a pending RETURNING statement would hold the write lock

    def finish_run(self, run_id: int, status: str, summary: dict[str, Any] | None = None) -> None:
        """Mark a run finished with `status` (ok, failed, interrupted) and a JSON summary; its frame records are
        packed (one row per device). A device of the run still `running` (its command was stopped before it
        could say how the device ended, e.g. by a second Ctrl-C) becomes `interrupted` with it."""
        self._pack_frames(run_id)
        with self._tx():
            self.db.execute(
                "UPDATE devices SET status = 'interrupted' WHERE run_id = ? AND status = 'running'", (run_id,)
            )
            self.db.execute(
                "UPDATE runs SET finished_at = ?, status = ?, summary = ? WHERE id = ?",
                (_now(), status, json.dumps(summary or {}, default=str), run_id),
            )

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
        merged = {**stored.json_object(row[0], self.label, "devices", where, "info"), **info} if row else info
        self.db.execute(
            "UPDATE devices SET status = COALESCE(?, status), detail = COALESCE(?, detail), info = ?"
            " WHERE run_id = ? AND name = ?",
            (status, detail, json.dumps(merged, default=str), run_id, name),
        )

    def add_frame(self, run_id: int, device: str, frame: Frame, rx_ns: int | None = None) -> None:
        """Write one frame record now (committed at once)."""
        self.add_frames(run_id, device, [frame], rx_ns)

    def add_frames(self, run_id: int, device: str, frames: Iterable[Frame], rx_ns: int | None = None) -> None:
        """Write frame records in one transaction: a row each while the run goes on (small commits from the frame
        writer's thread), packed when it finishes (`finish_run`). A record with the same index replaces the
        stored one."""
        rows = [
            (
                run_id, device, f.i, f.vsync, f.due, int(f.ran), f.t0, f.t1, getattr(f, "act", None),
                getattr(f, "p", None), f.seq, int(f.skip), int(f.late), getattr(f, "q", 0),
                getattr(f, "model", None), rx_ns if rx_ns is not None else getattr(f, "rx_ns", None),
            )
            for f in frames
        ]  # fmt: skip
        with self._tx():
            self.db.executemany("INSERT OR REPLACE INTO frames VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def _pack_frames(self, run_id: int) -> None:
        """Move the run's frame rows into one packed row per device (merged with what was packed before), in one
        transaction; the rows' space is then reused by the next runs' rows. Read before the transaction begins, so
        that it only writes (a SQLite reader turned writer fails at once when another connection wrote since): the
        run's own writer is gone by then."""
        packs = []
        for (device,) in self.db.execute("SELECT DISTINCT device FROM frames WHERE run_id = ?", (run_id,)).fetchall():
            try:
                columns = self.frame_columns(run_id, device)
            except (TypeError, ValueError, OverflowError):
                # a field that is no number an int64 holds (an agent's bad value): that device's records stay rows,
                # as its agent sent them, so that finishing the run and opening the store never fail on it
                continue
            packs.append((run_id, device, len(columns), *columns.pack()))
        if not packs:
            return
        with self._tx():
            for pack_row in packs:
                self.db.execute("INSERT OR REPLACE INTO frame_packs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", pack_row)
                self.db.execute("DELETE FROM frames WHERE run_id = ? AND device = ?", pack_row[:2])
        reuse_deleted(self.db, "frames")

    def frame_sink(self) -> BackgroundFrameWriter:
        """A background writer of frame records into this store, with its own connection (the replay's
        `FrameSink`; while the replay paces, its thread is real-time as the process's others are)."""
        return BackgroundFrameWriter(lambda: ResultStore(self.path))

    def add_inputs(self, run_id: int, device: str, rows: Iterable[tuple[int, str, int | None, int]]) -> None:
        """Write replayed inputs: (seq, channel, due_ns or None, sent_ns). Stored one row per channel of packed
        arrays (bench.store.packed); inputs already stored for the same seq are replaced."""
        by_channel: dict[str, dict[int, tuple[int, int]]] = {}
        for seq, ch, due, sent in rows:
            by_channel.setdefault(ch, {})[seq] = (NONE if due is None else due, sent)
        with self._tx():
            for ch, new in by_channel.items():
                merged = {**self._channel_inputs(run_id, device, ch), **new}
                seqs = sorted(merged)
                self.db.execute(
                    "INSERT OR REPLACE INTO input_sends VALUES (?,?,?,?,?,?,?)",
                    (run_id, device, ch, len(seqs), pack(seqs), pack([merged[q][0] for q in seqs]),
                     pack([merged[q][1] for q in seqs])),
                )  # fmt: skip

    def _channel_inputs(self, run_id: int, device: str, ch: str) -> dict[int, tuple[int, int]]:
        """seq -> (due_ns or NONE, sent_ns) stored for one channel."""
        row = self.db.execute(
            "SELECT seq, due, sent FROM input_sends WHERE run_id = ? AND device = ? AND ch = ?", (run_id, device, ch)
        ).fetchone()
        if row is None:
            return {}
        seqs, due, sent = (unpack(blob) for blob in row)
        return {int(q): (int(d), int(t)) for q, d, t in zip(seqs, due, sent, strict=True)}

    def set_clock(
        self, run_id: int, device: str, offset_ns: float, drift_ppm: float, ref_ns: int, uncertainty_ns: float | None
    ) -> None:
        """The device clock mapping used for this run."""
        self.db.execute(
            "INSERT OR REPLACE INTO clock VALUES (?,?,?,?,?,?)",
            (run_id, device, offset_ns, drift_ppm, ref_ns, uncertainty_ns),
        )

    def add_measurements(self, run_id: int, device: str, measurements: Iterable[Measurement]) -> None:
        """Write measurements (replacing same-named ones of this run and device). The schema's limit and outcome
        columns are from when measurements carried fixed limits: written empty and "unset". A description that is
        the catalogue's rule for the name is written empty (`measurements` reads the rule back)."""
        rows = [
            (run_id, device, m.name, m.unit, m.value, None, None, None, None, "unset", m.samples, ",".join(m.flags),
             "" if m.description == _rule(m.name) else m.description)
            for m in measurements
        ]  # fmt: skip
        with self._tx():
            self.db.executemany("INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def add_histograms(self, run_id: int, device: str, histograms: Iterable[Histogram]) -> None:
        """Write histograms in HdrHistogram's standard encoded form."""
        with self._tx():
            self.db.executemany(
                "INSERT OR REPLACE INTO histograms VALUES (?,?,?,?,?,?)",
                [(run_id, device, h.name, h.unit, h.count, h.encode()) for h in histograms],
            )

    def add_faults(self, run_id: int, device: str, faults: Sequence[FaultEvent]) -> None:
        """Write fault events (numbered in order)."""
        start = self.db.execute(
            "SELECT COUNT(*) FROM faults WHERE run_id = ? AND device = ?", (run_id, device)
        ).fetchone()[0]
        with self._tx():
            self.db.executemany(
                "INSERT INTO faults VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        run_id, device, start + k, f.kind, f.cause, f.model_version, f.prev_version, f.t_switch_us,
                        f.t_fault_us, f.t_fault_bench_ns, f.since_switch_ms, f.rollback_us, f.detail,
                    )
                    for k, f in enumerate(faults)
                ],
            )  # fmt: skip

    def add_telemetry(self, run_id: int, device: str, rows: Iterable[tuple[int, str, float, str, str]]) -> int:
        """Write telemetry values (t_ns, name, value, unit, source) of `device`; returns how many."""
        values = [(run_id, device, t_ns, name, value, unit, source) for t_ns, name, value, unit, source in rows]
        with self._tx():
            self.db.executemany("INSERT OR REPLACE INTO telemetry VALUES (?,?,?,?,?,?,?)", values)
        return len(values)

    # -- reading -----------------------------------------------------------------------------------

    def runs(self, *, kind: str | None = None, limit: int | None = None) -> list[RunRow]:
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
            raise ConfigError(f"results store {self.path}: no run {run_id}")
        return self._run(row)

    def devices(self, run_id: int) -> list[DeviceRow]:
        """The devices of a run, by name."""
        rows = self.db.execute("SELECT * FROM devices WHERE run_id = ? ORDER BY name", (run_id,))
        return [
            DeviceRow(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                stored.json_object(r[5], self.label, "devices", f"({r[0]}, {r[1]!r})", "info"),
            )
            for r in rows
        ]

    def measurements(self, run_id: int, device: str | None = None) -> list[MeasurementRow]:
        """Measurements of a run (one device's, or all), by device then name."""
        sql = "SELECT * FROM measurements WHERE run_id = ?" + (" AND device = ?" if device else "")
        rows = self.db.execute(sql + " ORDER BY device, name", (run_id, device) if device else (run_id,))
        return [self._measurement(r) for r in rows]

    def _measurement(self, r: tuple) -> MeasurementRow:
        where = f"({r[0]}, {r[1]!r}, {r[2]!r})"
        numbers = [stored.number(v, self.label, "measurements", where, f) for v, f in zip(r[4:9], _REALS, strict=True)]
        samples = None if r[10] is None else stored.integer(r[10], self.label, "measurements", where, "samples")
        flags = tuple(f for f in str(r[11] or "").split(",") if f)
        return MeasurementRow(r[0], r[1], r[2], r[3], *numbers, r[9], samples, flags, r[12] or _rule(r[2]))

    def history(self, name: str, device: str, *, limit: int = 30) -> list[tuple[int, str, float | None]]:
        """(run id, started_at, value) of measurement `name` on `device` over the latest runs, oldest first."""
        rows = self.db.execute(
            "SELECT r.id, r.started_at, m.value FROM measurements m JOIN runs r ON r.id = m.run_id"
            " WHERE m.name = ? AND m.device = ? ORDER BY r.id DESC LIMIT ?",
            (name, device, limit),
        ).fetchall()
        return list(reversed(rows))

    def histograms(self, run_id: int, device: str) -> dict[str, Histogram]:
        """name -> Histogram of one device in a run."""
        rows = self.db.execute(
            "SELECT name, unit, encoded FROM histograms WHERE run_id = ? AND device = ?", (run_id, device)
        )
        out = {}
        for name, unit, encoded in rows:
            try:
                out[name] = Histogram.decode(name, unit, encoded)
            except Exception as exc:  # hdrh raises its own classes, ValueError, zlib.error, TypeError
                where = f"({run_id}, {device!r}, {name!r})"
                raise stored.DamagedStore(
                    f"results store {self.label}: table histograms, row {where}, field encoded: cannot decode "
                    f"({type(exc).__name__}: {str(exc)[:60]})",
                    hint="the store was changed outside the bench: restore it from a backup, or delete that row",
                    file=self.label,
                    field="histograms.encoded",
                ) from None
        return out

    def telemetry(self, run_id: int, device: str) -> list[tuple[str, str, int, float]]:
        """Telemetry values of `device` as (name, unit, t_ns, value), by name then time."""
        return self.db.execute(
            "SELECT name, unit, t_ns, value FROM telemetry WHERE run_id = ? AND device = ? ORDER BY name, t_ns",
            (run_id, device),
        ).fetchall()

    def frame_columns(self, run_id: int, device: str) -> FrameColumns:
        """Frame records of one device in a run as arrays, in frame order: the packed row of a finished run, merged
        with the rows of one still being written (or killed, or written before frames were packed). Every reader
        of frame records reads them here."""
        packed = self.db.execute(
            f"SELECT {', '.join(PACKED)}, flags FROM frame_packs WHERE run_id = ? AND device = ?", (run_id, device)
        ).fetchone()
        rows = self.db.execute(
            f"SELECT {', '.join(FIELDS)} FROM frames WHERE run_id = ? AND device = ?", (run_id, device)
        ).fetchall()
        columns = FrameColumns.unpack(packed) if packed else empty()
        return columns.merged(FrameColumns.from_rows(rows)) if rows else columns

    def frames(self, run_id: int, device: str) -> Iterator[Frame]:
        """Frame records of one device in a run, in frame order."""
        return self.frame_columns(run_id, device).frames()

    def frame_count(self, run_id: int, device: str | None = None) -> int:
        """How many frame records a run (or one of its devices) has."""
        where, params = "run_id = ?" + (" AND device = ?" if device else ""), (run_id, device) if device else (run_id,)
        packed = dict(self.db.execute(f"SELECT device, n FROM frame_packs WHERE {where}", params).fetchall())
        rows = self.db.execute(f"SELECT device, COUNT(*) FROM frames WHERE {where} GROUP BY device", params)
        live = dict(rows.fetchall())
        # a device with both (records written after its run was packed) is counted record by record
        return sum(
            len(self.frame_columns(run_id, d)) if d in packed and d in live else packed.get(d, 0) + live.get(d, 0)
            for d in packed.keys() | live.keys()
        )

    def inputs(self, run_id: int, device: str) -> dict[int, int]:
        """Input seq -> bench send time (ns) of one device in a run (also of runs stored a row per input)."""
        rows = self.db.execute("SELECT seq, sent_ns FROM inputs WHERE run_id = ? AND device = ?", (run_id, device))
        sent = dict(rows.fetchall())
        packed = self.db.execute("SELECT seq, sent FROM input_sends WHERE run_id = ? AND device = ?", (run_id, device))
        for seqs, times in packed.fetchall():
            sent.update(zip(unpack(seqs).tolist(), unpack(times).tolist(), strict=True))
        return sent

    def input_count(self, run_id: int, device: str) -> int:
        """How many replayed inputs are stored for one device in a run."""
        legacy = self.db.execute("SELECT COUNT(*) FROM inputs WHERE run_id = ? AND device = ?", (run_id, device))
        packed = self.db.execute("SELECT SUM(n) FROM input_sends WHERE run_id = ? AND device = ?", (run_id, device))
        return int(legacy.fetchone()[0]) + int(packed.fetchone()[0] or 0)

    # -- retention ---------------------------------------------------------------------------------

    def raw_holders(self) -> list[tuple[int, str, str | None, str, str]]:
        """(run id, device, session, started_at, run status) of every device part whose raw rows were never
        pruned, newest run first."""
        return self.db.execute(
            "SELECT r.id, d.name, r.session, r.started_at, r.status FROM devices d JOIN runs r ON r.id = d.run_id"
            " WHERE NOT EXISTS (SELECT 1 FROM raw_pruned p WHERE p.run_id = d.run_id AND p.device = d.name)"
            " ORDER BY r.started_at DESC, r.id DESC, d.name"
        ).fetchall()

    def prune_raw(self, run_id: int, device: str) -> tuple[int, int]:
        """Delete one device's frame and input rows of a run, in one transaction, and record that they are gone
        (`raw_pruned`, read by the report); returns (frames, inputs) removed."""
        frames = self.frame_count(run_id, device)
        inputs = self.input_count(run_id, device)
        with self._tx():
            for table in RAW_TABLES:
                self.db.execute(f"DELETE FROM {table} WHERE run_id = ? AND device = ?", (run_id, device))
            self.db.execute(
                "INSERT OR REPLACE INTO raw_pruned VALUES (?,?,?,?,?)", (run_id, device, _now(), frames, inputs)
            )
        return frames, inputs

    def raw_pruned(self, run_id: int) -> dict[str, str]:
        """Device -> when its frame rows of run `run_id` were pruned (absent: still stored, or it never had any, as
        in an update-and-faults run)."""
        rows = self.db.execute("SELECT device, at FROM raw_pruned WHERE run_id = ? AND frames > 0", (run_id,))
        return dict(rows.fetchall())

    def size_bytes(self) -> int:
        """Bytes the store takes on disk (SQLite file and WAL, or the PostgreSQL database)."""
        return database_size(self.db, self.path if isinstance(self.path, Path) else None)

    def reclaim_space(self) -> None:
        """Give the space of deleted raw rows back (SQLite VACUUM; PostgreSQL VACUUM of the raw tables)."""
        reclaim_space(self.db, RAW_TABLES)

    def faults(self, run_id: int, device: str | None = None) -> list[tuple[str, FaultEvent]]:
        """(device, FaultEvent) of a run, in order."""
        sql = "SELECT * FROM faults WHERE run_id = ?" + (" AND device = ?" if device else "") + " ORDER BY device, n"
        rows = self.db.execute(sql, (run_id, device) if device else (run_id,))
        return [(r[1], FaultEvent(*r[3:])) for r in rows]

    def clock(self, run_id: int, device: str) -> dict[str, float] | None:
        """The clock mapping stored for a device in a run."""
        row = self.db.execute(
            "SELECT offset_ns, drift_ppm, ref_ns, uncertainty_ns FROM clock WHERE run_id = ? AND device = ?",
            (run_id, device),
        ).fetchone()
        return dict(zip(("offset_ns", "drift_ppm", "ref_ns", "uncertainty_ns"), row, strict=True)) if row else None

    def _run(self, r: tuple) -> RunRow:
        config = stored.json_object(r[9], self.label, "runs", r[0], "config")
        summary = stored.json_object(r[10], self.label, "runs", r[0], "summary")
        speed = stored.number(r[7], self.label, "runs", r[0], "speed")
        return RunRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], speed, r[8], config, summary)

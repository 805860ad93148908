"""The results store: SQLite (one file per bench host; the default) or PostgreSQL (a `postgresql://` URL:
one history that several bench hosts write at once). Same API and schema; the SQL dialect differences
live in bench.store.dialect.

`ResultStore` opens the database and brings its schema up to date; what is kept is read and written through
one store per kind of record, each owning its SQL: `runs` (runs and their devices), `frames` (frame records,
inputs, clock mappings), `measures` (measurements, histograms, faults, telemetry), `verdicts` (host noise,
fingerprints, verdicts), `windows` (baseline membership and named baselines), `alerts`, `health` (device
health) and `raw` (raw rows' retention and the store's size). Together, `runs`, `frames` and `measures` are
the replay's `RunSink` (bench.replay.sink)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.paths import DEFAULT_STORE
from bench.store import stored
from bench.store.alerts import AlertStore
from bench.store.database import Database
from bench.store.dialect import PostgresConnection, connect_sqlite, is_postgres
from bench.store.frames import FrameStore
from bench.store.health import HealthStore
from bench.store.measurements import MeasurementStore
from bench.store.raw import RawStore
from bench.store.reading import Reading
from bench.store.runs import RunStore
from bench.store.schema import FIRST_VERSION, MIGRATIONS, SCHEMA_VERSION, TABLES
from bench.store.verdicts import VerdictStore
from bench.store.windows import WindowStore

_META = "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)"


def _redacted(url: str) -> str:
    """A URL without its password, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


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


class ResultStore:
    """Runs and everything measured in them, in one SQLite file or one PostgreSQL database.

    `path` is the SQLite file, or the PostgreSQL URL (a str) that `open_store` was given."""

    def __init__(self, path: Path | str) -> None:
        self.path = path if isinstance(path, str) and is_postgres(path) else Path(path)
        self.label = _redacted(self.path) if isinstance(self.path, str) else str(self.path)
        self.db = Database(self._connect(), self.label)
        self._migrate()
        self.frames = FrameStore(self.db, lambda: ResultStore(self.path))
        self.runs = RunStore(self.db, self.frames)
        self.measures = MeasurementStore(self.db)
        self.verdicts = VerdictStore(self.db)
        self.windows = WindowStore(self.db)
        self.alerts = AlertStore(self.db)
        self.health = HealthStore(self.db)
        self.raw = RawStore(self.db, self.frames, self.path if isinstance(self.path, Path) else None)
        self.reading = Reading(self.runs, self.frames, self.measures, self.verdicts, self.alerts, self.raw)
        self.interrupted_runs = self.runs.close_orphaned()

    def _connect(self) -> Any:
        """The open connection, its schema created; a ConfigError naming the store when it cannot be opened."""
        try:
            if isinstance(self.path, str):
                return PostgresConnection(self.path, TABLES, _META, (str(FIRST_VERSION),))
            return connect_sqlite(self.path, TABLES, _META, (str(FIRST_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(
                f"results store {self.path}: cannot open: {exc}", hint="check the path (--results)"
            ) from None
        except Exception as exc:  # psycopg.Error (imported lazily): server down, no such database, no access
            if type(exc).__module__.split(".")[0] != "psycopg":
                raise
            raise ConfigError(
                f"results store {self.label}: cannot open: {str(exc).strip()}",
                hint="check the URL (--results or [bench] results) and that the PostgreSQL server runs",
            ) from None

    def _migrate(self) -> None:
        """Bring a store written by an older bench (or a new one, created at FIRST_VERSION) to SCHEMA_VERSION, one
        version at a time, each step in one transaction that first moves the version on from the one it was: of two
        hosts opening the store at once, one runs the step and the other finds it done. A store a newer bench wrote
        is refused."""
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = stored.integer(row[0] if row else None, self.label, "meta", "'schema_version'", "value", low=1)
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"results store {self.path}: schema version {version}, this bench writes {SCHEMA_VERSION}",
                hint="update this bench host's checkout: another host's newer bench migrated the store",
            )
        for step in range(version, SCHEMA_VERSION):
            with self.db.tx():
                moved = self.db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version' AND value = ? RETURNING key",
                    (str(step + 1), str(step)),
                ).fetchall()
                for statement in MIGRATIONS.get(step, []) if moved else []:
                    self.db.execute(statement)

    @property
    def local_dir(self) -> Path | None:
        """The folder of a SQLite store (logs go next to it); None for a database server."""
        return self.path.parent if isinstance(self.path, Path) else None

    def close(self) -> None:
        """Close the database."""
        self.db.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Named baselines, stored with the results: a name (default "default") points at a run.

`hilbench baseline set RUN [--name NAME]` writes one; a nightly compares with the baseline it names.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from bench.core.errors import ConfigError
from bench.store.results import ResultStore

DEFAULT_BASELINE = "default"
_DDL = (
    "CREATE TABLE IF NOT EXISTS baselines ("
    " name TEXT PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), set_at TEXT NOT NULL)"
)


@dataclass(frozen=True)
class Baseline:
    """A named pointer to a run."""

    name: str
    run_id: int
    set_at: str


def set_baseline(store: ResultStore, run_id: int, name: str = DEFAULT_BASELINE) -> Baseline:
    """Make run `run_id` the baseline called `name` (replacing the old one); the run must exist."""
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"baseline name {name!r}: use letters, digits, '-', '_' or '.'")
    run = store.run(run_id)  # ConfigError naming the store if there is no such run
    if run.status in ("running", "interrupted"):
        raise ConfigError(
            f"run {run_id} is {run.status}: a run that did not finish cannot be a baseline",
            hint="pick a finished run (`hilbench report` lists them)",
        )
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.db.execute(_DDL)
    store.db.execute("INSERT OR REPLACE INTO baselines (name, run_id, set_at) VALUES (?, ?, ?)", (name, run_id, now))
    return Baseline(name, run_id, now)


def get_baseline(store: ResultStore, name: str = DEFAULT_BASELINE) -> Baseline | None:
    """The baseline called `name`, or None when none is set."""
    store.db.execute(_DDL)
    row = store.db.execute("SELECT name, run_id, set_at FROM baselines WHERE name = ?", (name,)).fetchone()
    return Baseline(*row) if row else None


def list_baselines(store: ResultStore) -> list[Baseline]:
    """Every baseline, by name."""
    store.db.execute(_DDL)
    return [Baseline(*r) for r in store.db.execute("SELECT name, run_id, set_at FROM baselines ORDER BY name")]

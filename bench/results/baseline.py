"""Named baselines: a name (default "default") points at a finished run (stored by bench.store.windows).

`hilbench baseline set RUN [--name NAME]` writes one; a nightly compares with the baseline it names.
"""

from __future__ import annotations

from bench.core.errors import ConfigError
from bench.store.results import ResultStore
from bench.store.windows import DEFAULT_BASELINE, Baseline


def set_baseline(store: ResultStore, run_id: int, name: str = DEFAULT_BASELINE) -> Baseline:
    """Make run `run_id` the baseline called `name` (replacing the old one); the run must exist and be finished."""
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"baseline name {name!r}: use letters, digits, '-', '_' or '.'")
    run = store.runs.run(run_id)  # ConfigError naming the store if there is no such run
    if run.status in ("running", "interrupted"):
        raise ConfigError(
            f"run {run_id} is {run.status}: a run that did not finish cannot be a baseline",
            hint="pick a finished run (`hilbench report` lists them)",
        )
    return store.windows.set_named(name, run_id)

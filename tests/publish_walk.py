"""The walk of one run's id through `publish_run`, traced as it runs: every call of a function in bench/ that is
handed the run's id (in a parameter that names a run: `run_id`, `run_ids`, `pinned`, `up_to`, ..., alone or in a
collection) is a step; consecutive steps in one module are one stop, and the store (bench/store/, the boundary
the rest of the bench asks for rows) is one module; a stop in a module the walk had already left is a return.
Also counted: the store's round trips (statements sent to the database) while the run is published.

    .venv/bin/python -m tests.publish_walk        # prints the stops and the counts for a judged night
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.conftest import REPO

BENCH = str(REPO / "bench") + "/"
STORE = str(REPO / "bench" / "store") + "/"
DATABASE = STORE + "database.py"
# the names the run's id goes by on its walk
RUN_NAMES = {"run_id", "run_ids", "runs", "ids", "run", "pinned", "shown", "up_to", "before", "after", "last", "bases"}


@dataclass
class Walk:
    """The stops (module, functions) of a run id's walk, in order, and the store's round trips."""

    stops: list[tuple[str, list[str]]] = field(default_factory=list)
    round_trips: int = 0

    @property
    def returns(self) -> int:
        """Stops in a module the walk had already left."""
        seen: set[str] = set()
        count = 0
        for module, _ in self.stops:
            count += module in seen
            seen.add(module)
        return count

    def lines(self) -> list[str]:
        out = [f"{k + 1:2}. {m} ({', '.join(dict.fromkeys(f))})" for k, (m, f) in enumerate(self.stops)]
        return [*out, f"{len(self.stops)} stops, {self.returns} returns, {self.round_trips} store round trips"]


def _holds(value: Any, run_id: int) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value == run_id
    if isinstance(value, list | tuple | set | frozenset) and len(value) < 1000:
        return any(isinstance(v, int) and not isinstance(v, bool) and v == run_id for v in value)
    return False


def traced(run_id: int, call: Any) -> Walk:
    """Run `call()` and trace the walk of `run_id` through bench/."""
    walk = Walk()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        path = frame.f_code.co_filename
        if path == DATABASE and frame.f_code.co_name in ("execute", "executemany"):
            walk.round_trips += 1
        if not path.startswith(BENCH):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        if not any(n in RUN_NAMES and _holds(frame.f_locals.get(n), run_id) for n in names):
            return
        module = "bench/store/" if path.startswith(STORE) else path[len(BENCH) - len("bench/") :]
        if walk.stops and walk.stops[-1][0] == module:
            walk.stops[-1][1].append(code.co_name)
        else:
            walk.stops.append((module, [code.co_name]))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return walk


def publish_walk(folder: Path, *, compare: bool = False) -> Walk:
    """The walk of publishing the last of 12 judged nights (stored verdicts, as the nightly leaves them), or with
    `compare` of the same night judged now against the night before it (`hilbench report --compare`)."""
    from bench.report.publish import publish_run
    from bench.results.thresholds import load_thresholds
    from bench.store.results import open_store
    from tests.nightly_history import Plan, write_history

    rules = load_thresholds()
    plan = Plan(nights=12, creep_from=5, step_night=9, failed={10: "c6-a"}, model_every=4)
    with open_store(folder / "results.sqlite") as store:
        ids = write_history(store, rules, plan, ("c6-a", "orin-1", "pi5-1"))
        other = ids[-2] if compare else None
        return traced(
            ids[-1],
            lambda: publish_run(store, ids[-1], reports_dir=folder / "reports", thresholds=rules, compare_run=other),
        )


if __name__ == "__main__":
    for compare in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            print("judged now against the night before (--compare):" if compare else "a judged night:")
            print("\n".join(publish_walk(Path(tmp), compare=compare).lines()))

"""Device health for reports: each device's state and failure history (bench.store.health), summed up as
failure and recovery counts and MTBF."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from bench.store.health import FAILURE, PASSED_ON_RETRY, RECOVERED, UNRECOVERED, Health
from bench.store.results import ResultStore


@dataclass(frozen=True)
class HealthSummary:
    """A device's state and its failure history, for reports."""

    health: Health
    failures: int
    recoveries: int
    unrecovered: int
    hours_observed: float | None  # from its first run (or first event) until now
    by_step: dict[str, int]  # which ladder step brought it back, how often
    passed_on_retry: int = 0  # runs that failed on infrastructure and passed when retried (flakiness)

    @property
    def mtbf_h(self) -> float | None:
        """Mean time between failures in hours (None without a failure or any history)."""
        if not self.failures or self.hours_observed is None:
            return None
        return self.hours_observed / self.failures

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **asdict(self.health),
            "failures": self.failures,
            "recoveries": self.recoveries,
            "unrecovered": self.unrecovered,
            "recovered_by": self.by_step,
            "passed_on_retry": self.passed_on_retry,
            "hours_observed": None if self.hours_observed is None else round(self.hours_observed, 3),
            "mtbf_h": None if self.mtbf_h is None else round(self.mtbf_h, 3),
        }


def bad_devices(store: ResultStore, names: list[str]) -> dict[str, Health]:
    """The devices among `names` marked bad, by name."""
    states = (store.health.current(n) for n in names)
    return {h.device: h for h in states if h.bad}


def summary(store: ResultStore, device: str, now: dt.datetime | None = None) -> HealthSummary:
    """State, failure counts and the span the MTBF is taken over (wall time since the device's first run)."""
    history = store.health.events(device)
    first_run = store.runs.first_started(device)
    starts = [t for t in (first_run, history[0]["at"] if history else None) if t]
    hours = None
    if starts:
        first = dt.datetime.fromisoformat(min(starts))
        hours = max(((now or dt.datetime.now(dt.UTC)) - first).total_seconds() / 3600, 0.0)
    by_step: dict[str, int] = {}
    for e in history:
        if e["event"] == RECOVERED and e["step"]:
            by_step[e["step"]] = by_step.get(e["step"], 0) + 1
    return HealthSummary(
        health=store.health.current(device),
        failures=sum(e["event"] == FAILURE for e in history),
        recoveries=sum(e["event"] == RECOVERED for e in history),
        unrecovered=sum(e["event"] == UNRECOVERED for e in history),
        hours_observed=hours,
        by_step=by_step,
        passed_on_retry=sum(e["event"] == PASSED_ON_RETRY for e in history),
    )

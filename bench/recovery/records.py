"""Device health in the results store: each device's state (`good`/`bad`, with the reason) and its events
(failures, recoveries and which step did it, state changes), from which the nightly reports MTBF.

The tables (`device_health`, `device_events`) live in the store's schema, so a lab's PostgreSQL keeps one
health record for every bench host."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from bench.store.results import ResultStore

GOOD, BAD = "good", "bad"
# device_events.event values
FAILURE, RECOVERED, UNRECOVERED, MARKED_BAD, MARKED_GOOD = "failure", "recovered", "unrecovered", "bad", "good"
PASSED_ON_RETRY = "passed_on_retry"  # an infrastructure failure whose retry passed: the device's flakiness


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Health:
    """A device's recorded state."""

    device: str
    state: str  # good or bad
    reason: str = ""
    since: str = ""

    @property
    def bad(self) -> bool:
        """True when later runs must skip the device."""
        return self.state == BAD


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


def health(store: ResultStore, device: str) -> Health:
    """The device's recorded state (`good` when nothing was ever recorded)."""
    row = store.db.execute("SELECT state, reason, since FROM device_health WHERE device = ?", (device,)).fetchone()
    return Health(device, *row) if row else Health(device, GOOD)


def bad_devices(store: ResultStore, names: list[str]) -> dict[str, Health]:
    """The devices among `names` marked bad, by name."""
    states = (health(store, n) for n in names)
    return {h.device: h for h in states if h.bad}


def record_event(
    store: ResultStore,
    device: str,
    event: str,
    *,
    step: str | None = None,
    seconds: float | None = None,
    run_id: int | None = None,
    detail: str = "",
) -> None:
    """Append one event to the device's history."""
    store.db.execute(
        "INSERT INTO device_events (device, at, event, step, seconds, run_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (device, _now(), event, step, seconds, run_id, detail),
    )


def set_state(store: ResultStore, device: str, state: str, reason: str = "", run_id: int | None = None) -> Health:
    """Mark the device good or bad (an event is recorded when the state changes)."""
    before = health(store, device)
    if before.state == state and before.reason == reason:
        return before
    since = _now() if before.state != state else before.since
    store.db.execute(
        "INSERT OR REPLACE INTO device_health (device, state, reason, since) VALUES (?, ?, ?, ?)",
        (device, state, reason, since),
    )
    if before.state != state:
        record_event(store, device, MARKED_BAD if state == BAD else MARKED_GOOD, run_id=run_id, detail=reason)
    return Health(device, state, reason, since)


def events(store: ResultStore, device: str) -> list[dict[str, Any]]:
    """The device's events, oldest first."""
    rows = store.db.execute(
        "SELECT at, event, step, seconds, run_id, detail FROM device_events WHERE device = ? ORDER BY id", (device,)
    ).fetchall()
    keys = ("at", "event", "step", "seconds", "run_id", "detail")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def summary(store: ResultStore, device: str, now: dt.datetime | None = None) -> HealthSummary:
    """State, failure counts and the span the MTBF is taken over (wall time since the device's first run)."""
    history = events(store, device)
    first_run = store.db.execute(
        "SELECT MIN(r.started_at) FROM runs r JOIN devices d ON d.run_id = r.id WHERE d.name = ?", (device,)
    ).fetchone()[0]
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
        health=health(store, device),
        failures=sum(e["event"] == FAILURE for e in history),
        recoveries=sum(e["event"] == RECOVERED for e in history),
        unrecovered=sum(e["event"] == UNRECOVERED for e in history),
        hours_observed=hours,
        by_step=by_step,
        passed_on_retry=sum(e["event"] == PASSED_ON_RETRY for e in history),
    )

"""Device health in the results store: each device's state (`good`/`bad`, with the reason) and its events
(failures, recoveries and which step did it, state changes), tables `device_health` and `device_events`, so a
lab's PostgreSQL keeps one health record for every bench host (bench.recovery.records reports MTBF from them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.store.database import Database
from bench.store.runs import now

GOOD, BAD = "good", "bad"
# device_events.event values
FAILURE, RECOVERED, UNRECOVERED, MARKED_BAD, MARKED_GOOD = "failure", "recovered", "unrecovered", "bad", "good"
PASSED_ON_RETRY = "passed_on_retry"  # an infrastructure failure whose retry passed: the device's flakiness
_EVENT_KEYS = ("at", "event", "step", "seconds", "run_id", "detail")


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


class HealthStore:
    """Each device's state and its history of failures and recoveries."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def current(self, device: str) -> Health:
        """The device's recorded state (`good` when nothing was ever recorded)."""
        row = self.db.execute("SELECT state, reason, since FROM device_health WHERE device = ?", (device,)).fetchone()
        return Health(device, *row) if row else Health(device, GOOD)

    def record_event(
        self,
        device: str,
        event: str,
        *,
        step: str | None = None,
        seconds: float | None = None,
        run_id: int | None = None,
        detail: str = "",
    ) -> None:
        """Append one event to the device's history."""
        self.db.execute(
            "INSERT INTO device_events (device, at, event, step, seconds, run_id, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (device, now(), event, step, seconds, run_id, detail),
        )

    def set_state(self, device: str, state: str, reason: str = "", run_id: int | None = None) -> Health:
        """Mark the device good or bad (an event is recorded when the state changes)."""
        before = self.current(device)
        if before.state == state and before.reason == reason:
            return before
        since = now() if before.state != state else before.since
        self.db.execute(
            "INSERT OR REPLACE INTO device_health (device, state, reason, since) VALUES (?, ?, ?, ?)",
            (device, state, reason, since),
        )
        if before.state != state:
            self.record_event(device, MARKED_BAD if state == BAD else MARKED_GOOD, run_id=run_id, detail=reason)
        return Health(device, state, reason, since)

    def events(self, device: str) -> list[dict[str, Any]]:
        """The device's events, oldest first."""
        rows = self.db.execute(
            "SELECT at, event, step, seconds, run_id, detail FROM device_events WHERE device = ? ORDER BY id", (device,)
        ).fetchall()
        return [dict(zip(_EVENT_KEYS, r, strict=True)) for r in rows]

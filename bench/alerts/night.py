"""One night's alerts, as its page, terminal summary, `--json` and CI files show them: the new ones (opened or
reopened by the night's runs), the known ones (open alerts the night's steps joined), those it fixed, those that
fail the night, and every alert left untriaged for too long."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.alerts import table
from bench.alerts.model import ACKNOWLEDGED, UNTRIAGED, Alert
from bench.results.thresholds import AlertRules
from bench.store.reading import NightRecord
from bench.store.results import ResultStore

NEW_EVENTS = ("opened", "reopened")


@dataclass
class NightAlerts:
    """The alerts of one night's runs, each with its state as stored now."""

    new: list[Alert] = field(default_factory=list)
    known: list[Alert] = field(default_factory=list)
    fixed: list[Alert] = field(default_factory=list)
    overdue: list[Alert] = field(default_factory=list)  # untriaged for longer than the rules allow (any night's)
    rules: AlertRules = field(default_factory=AlertRules)
    now: dt.datetime | None = None

    @property
    def failing(self) -> list[Alert]:
        """The night's alerts that make it exit 1: untriaged ones, and acknowledged ones when the rules say so."""
        states = (UNTRIAGED, ACKNOWLEDGED) if self.rules.fail_acknowledged else (UNTRIAGED,)
        return [a for a in [*self.new, *self.known] if a.state in states]

    def lines(self) -> list[str]:
        """The summary's lines (each under 80 columns): new alerts, known ones, fixed ones, overdue ones."""
        out = []
        for label, alerts in (("NEW", self.new), ("known", self.known), ("fixed", self.fixed)):
            out += [f"  {label} {a.line(self.now, 79 - 3 - len(label))}" for a in alerts]
            out += [f"    downstream of #{a.suggested_of}? hilbench alerts downstream {a.id} --of {a.suggested_of}"
                    for a in alerts if label == "NEW" and a.suggested_of and a.of_alert is None]  # fmt: skip
        days = f"{self.rules.untriaged_days:g}"
        out += [f"  OVERDUE (untriaged > {days} d) {a.line(self.now, 58 - len(days))}" for a in self.overdue]
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "new": [a.to_json(self.now) for a in self.new],
            "known": [a.to_json(self.now) for a in self.known],
            "fixed": [a.to_json(self.now) for a in self.fixed],
            "failing": [a.id for a in self.failing],
            "overdue": [a.id for a in self.overdue],
            "fail_acknowledged": self.rules.fail_acknowledged,
        }


def night_alerts(
    store: ResultStore, run_ids: Iterable[int], rules: AlertRules | None = None, now: dt.datetime | None = None
) -> NightAlerts:
    """The alerts the runs `run_ids` (one night's session runs) opened, reopened, joined or fixed, by id."""
    return split_night(store.reading.night(run_ids), store.label, rules, now)


def split_night(
    night: NightRecord, label: str, rules: AlertRules | None = None, now: dt.datetime | None = None
) -> NightAlerts:
    """A night's alert changes (read from store `label` by bench.store.reading) split into new, known, fixed and
    overdue alerts."""
    rules = rules or AlertRules()
    by_event: dict[str, set[int]] = {}
    for e in night.events:
        by_event.setdefault(e.event, set()).add(e.alert_id)
    new_ids = set().union(*(by_event.get(e, set()) for e in NEW_EVENTS))
    known_ids = by_event.get("joined", set()) - new_ids
    fixed_ids = by_event.get("fixed", set())
    alerts = {i: table.checked(row, label) for i, row in night.alerts.items()}
    untriaged = (table.checked(row, label) for row in night.untriaged)
    overdue = sorted((a for a in untriaged if a.overdue(rules.untriaged_days, now)), key=lambda a: a.id)
    return NightAlerts([alerts[i] for i in sorted(new_ids)], [alerts[i] for i in sorted(known_ids)],
                       [alerts[i] for i in sorted(fixed_ids)], overdue, rules, now)  # fmt: skip

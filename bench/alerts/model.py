"""An alert and its states: what a team does with one cause of confirmed regressions, drifts or product failures.

An alert is one cause on one device: the metrics that moved on one night with the same fingerprint change (a new
model, firmware, agent bundle or OS image), or on the same first bad night. It lists each metric with its figure,
baseline, change and kind; a team triages the alert as a whole. States, and what moves an alert between them:

- `untriaged`: opened by a nightly (or reopened by one when its fix did not hold); nobody has looked yet;
- `acknowledged`: someone owns it (`owner`, `note`, optional `link` to a bug);
- `invalid`: not the product's fault (`reason`, e.g. the lab's USB hub);
- `downstream`: caused by another alert (`of_alert`), e.g. a second device's step on the same model change;
- `fixed`: every metric it lists recovered (`fixed_after_nights` nights in a row back inside the baseline's
  spread), or someone named the run that fixed it.

By hand (`hilbench alerts`), an alert that is not fixed may be acknowledged, marked invalid, downstream or
fixed; a fixed one only reopens by itself. A bad night on an open alert joins it; on a fixed one within
`reopen_nights` of its fix, it reopens it as untriaged (the owner and note stay, for whoever looks next)."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from bench.core.console import shown
from bench.core.errors import ConfigError
from bench.store.alerts import ACKNOWLEDGED, DOWNSTREAM, FIXED, INVALID, UNTRIAGED, AlertMetricRow, AlertRow

STATES = (UNTRIAGED, ACKNOWLEDGED, INVALID, DOWNSTREAM, FIXED)
OPEN = (UNTRIAGED, ACKNOWLEDGED, INVALID, DOWNSTREAM)  # a bad night joins these (a fixed one reopens)

REGRESSION = "regression"
DRIFT = "drift"
FAILURE = "failure"  # a product failure (a stage the product failed on the device), not a judged figure

# the states a hand-made change may start from (a fixed alert reopens only by itself, on a bad night)
BY_HAND_FROM = {ACKNOWLEDGED: OPEN, INVALID: OPEN, DOWNSTREAM: OPEN, FIXED: OPEN}


class AlertError(ConfigError):
    """A request about an alert that cannot be done (unknown id, a state change that is not allowed): exit 2."""


class AlertMetric(AlertMetricRow):
    """One metric an alert lists: its figure against its baseline, its change and kind, and whether it recovered."""

    @property
    def title(self) -> str:
        """What moved, for people ("inference P50", "product failure in replay")."""
        return str(self.data.get("title") or self.metric)

    @property
    def effect_pct(self) -> float | None:
        """Its first night's effect against the baseline, percent."""
        return self.data.get("effect_pct")

    @property
    def p_value(self) -> float | None:
        """Its first night's one-sided p-value (the effect's confidence is 1 - p)."""
        return self.data.get("p_value")

    @property
    def drift(self) -> dict[str, Any] | None:
        """A drift's newest figures: its first night (`since_run`), `nights` and cumulative `effect_pct`."""
        return self.data.get("drift") if self.kind == DRIFT else None

    def effect_label(self) -> str:
        """ "+41.0%" (the first night's effect), "drift +16.6% since run 12" (a drift's newest cumulative change)
        or "failed" (a product failure)."""
        if (drift := self.drift) and drift.get("effect_pct") is not None:
            return f"drift {drift['effect_pct']:+.1f}% since run {drift['since_run']}"
        return f"{self.effect_pct:+.1f}%" if self.effect_pct is not None else "failed"

    def effect_text(self) -> str:
        """ "+41% (p 0.0003)" for a figure; the failure's words for a product failure."""
        if self.effect_pct is None:
            return str(self.data.get("reason", ""))[:60] if self.kind == FAILURE else "-"
        p = self.p_value
        return f"{self.effect_pct:+.1f}%" + (f" (p {p:.2g})" if p is not None else "")

    def brief(self, room: int = 1000) -> str:
        """ "inference P50 +41.0%", "(recovered)" after a metric back for good; its title shortened to fit `room`
        characters (the effect kept whole)."""
        tail = f" {self.effect_label()}" + (" (recovered)" if self.recovered_run is not None else "")
        title, fits = self.title, max(4, room - len(tail))
        return (title if len(title) <= fits else title[: fits - 1] + "…") + tail

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, with its title and effect label."""
        return {**asdict(self), "title": self.title, "effect": self.effect_label()}


class Alert(AlertRow):
    """One alert: one cause on one device, the metrics it moved, its evidence and its state."""

    metrics: list[AlertMetric]

    @classmethod
    def of(cls, row: AlertRow) -> Alert:
        """The alert a stored row holds."""
        values = vars(row) | {"metrics": [AlertMetric(**vars(m)) for m in row.metrics]}
        return cls(**values)

    def metric(self, session: str, name: str) -> AlertMetric | None:
        """The metric `name` of `session` this alert lists, or None."""
        return next((m for m in self.metrics if (m.session, m.metric) == (session, name)), None)

    @property
    def lead(self) -> AlertMetric:
        """The metric it leads with: the first that moved, one not recovered before those that are."""
        return min(self.metrics, key=lambda m: m.recovered_run is not None)

    @property
    def kind(self) -> str:
        """`failure` when it lists product failures only, `drift` when one of its metrics is a drift, else
        `regression`."""
        kinds = {m.kind for m in self.metrics}
        if kinds == {FAILURE}:
            return FAILURE
        return DRIFT if DRIFT in kinds else REGRESSION

    @property
    def sessions(self) -> list[str]:
        """The sessions its metrics are of."""
        return sorted({m.session for m in self.metrics})

    @property
    def title(self) -> str:
        """What moved, for people: its lead metric's title, and how many more it lists ("inference P50 and 2
        more")."""
        more = len(self.metrics) - 1
        return self.lead.title + (f" and {more} more" if more > 0 else "")

    @property
    def change(self) -> list[str]:
        """The fingerprint change that came with the step ("model sha256 3f2a… -> 9b1c…")."""
        return list(self.data.get("change") or [])

    @property
    def cause(self) -> str:
        """The attribution's words, when the nightly found the cause by replay."""
        return str(self.data.get("cause") or "")

    @property
    def bisect(self) -> str:
        """The `hilbench bisect` command that finds the first bad build (judged on the first metric it opened with)."""
        return str(self.data.get("bisect") or "")

    @property
    def suggested_of(self) -> int | None:
        """An open alert on another device with the same fingerprint change: this one may be downstream of it."""
        return self.data.get("suggested_of")

    def what(self, room: int) -> str:
        """Its metrics in at most `room` characters: "inference P50 +41.0%, decision P50 +38.2%, +2 more" (those not
        recovered first; the first one's title shortened when even it does not fit)."""
        briefs = [m.brief() for m in sorted(self.metrics, key=lambda m: m.recovered_run is not None)]
        for k in range(len(briefs), 0, -1):
            text = ", ".join(briefs[:k]) + (f", +{len(briefs) - k} more" if k < len(briefs) else "")
            if len(text) <= room:
                return text
        tail = f", +{len(briefs) - 1} more" if len(briefs) > 1 else ""
        return self.lead.brief(room - len(tail)) + tail

    def age_days(self, now: dt.datetime | None = None) -> float:
        """Days since the alert entered its state."""
        now = now or dt.datetime.now(dt.UTC)
        return max(0.0, (now - _parse(self.state_since)).total_seconds() / 86400.0)

    def overdue(self, days: float, now: dt.datetime | None = None) -> bool:
        """Whether it has been untriaged for longer than `days`."""
        return self.state == UNTRIAGED and self.age_days(now) > days

    def line(self, now: dt.datetime | None = None, width: int = 70) -> str:
        """One line of at most `width` characters for a summary: "#3 pi5-1 inference P50 +41.0%, decision P50
        +38.2% · untriaged · 2.0 d" (its metrics as what(), shortened to fit)."""
        state = self.state + (f" of #{self.of_alert}" if self.state == DOWNSTREAM else "")
        head, tail = f"#{self.id} {self.device} ", f" · {state} · {self.age_days(now):.1f} d"
        room = max(12, width - len(head) - len(tail))
        return shown(head + self.what(room) + tail)  # a stored title or device sends no control character

    def to_json(self, now: dt.datetime | None = None) -> dict[str, Any]:
        """JSON-ready form, with its title, kind, sessions, metrics and age in days."""
        out = asdict(self)
        out.update(title=self.title, kind=self.kind, sessions=self.sessions, age_days=round(self.age_days(now), 2),
                   metrics=[m.to_json() for m in self.metrics])  # fmt: skip
        return out


def check_change(alert: Alert, to: str) -> None:
    """AlertError unless a hand-made change of `alert` to state `to` is allowed."""
    allowed = BY_HAND_FROM.get(to)
    if allowed is None:
        raise AlertError(f"alert {alert.id}: cannot be set to {to!r} by hand", hint=f"states: {', '.join(STATES)}")
    if alert.state not in allowed:
        hint = "a fixed alert reopens by itself when its step comes back" if alert.state == FIXED else ""
        raise AlertError(f"alert {alert.id} is {alert.state}: it cannot become {to}", hint=hint)


def _parse(stamp: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(stamp)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)

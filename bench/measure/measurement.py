"""Typed measurements, OpenHTF style: a name, a unit, a value, optional limits and the verdict they give."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Outcome(StrEnum):
    """A measurement's verdict against its limits."""

    PASS = "pass"
    MARGINAL = "marginal"  # inside the limits but beyond a marginal limit
    FAIL = "fail"
    UNSET = "unset"  # no limits, or no value


@dataclass(frozen=True)
class Limits:
    """Inclusive bounds; marginal bounds lie inside them and warn before a failure."""

    low: float | None = None
    high: float | None = None
    marginal_low: float | None = None
    marginal_high: float | None = None

    def judge(self, value: float | None) -> Outcome:
        """PASS, MARGINAL or FAIL for `value` (UNSET when there is no value or no bound)."""
        if value is None or (self.low is None and self.high is None):
            return Outcome.UNSET
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return Outcome.FAIL
        if (self.marginal_low is not None and value < self.marginal_low) or (
            self.marginal_high is not None and value > self.marginal_high
        ):
            return Outcome.MARGINAL
        return Outcome.PASS


@dataclass(frozen=True)
class Measurement:
    """One measured figure of one device in one run.

    `samples` is how many observations the value rests on; `flags` say why it should be read with care
    (e.g. `too_few_samples_for_p99`)."""

    name: str
    unit: str
    value: float | None
    limits: Limits | None = None
    samples: int | None = None
    flags: tuple[str, ...] = ()
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> Outcome:
        """The verdict of `limits` on `value`."""
        return self.limits.judge(self.value) if self.limits else Outcome.UNSET

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (with the outcome)."""
        data = asdict(self)
        data["flags"] = list(self.flags)
        data["outcome"] = str(self.outcome)
        return data

"""Failure classes: the one home for what a device's outcome in a run is.

Every device outcome (in a nightly, `hilbench replay`, `update`, `flash`, and the pytest plugin) is one of:

- pass
- regression: a confirmed regression of a judged figure
- product failure: the agent crashed, a model was refused or rolled back, the decision budget was missed
- infrastructure failure: the link was lost, the board hung (also when the recovery ladder brought it back:
  the figures of that run are not the product's), a flash or OS write failed, no lease was obtained
- inconclusive: the evidence is too weak to say (e.g. the bench host was busy)

An infrastructure failure is retried once (the nightly does); one that then passes is "passed on retry" and
counts as flakiness of its device. Exit codes: 1 when any device had a regression or product failure, 3 when
only infrastructure failed, else 0."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.core.errors import DeviceUnreachable, ExitCode, LeaseBusy, ProductFailure


class FailureClass(enum.StrEnum):
    """What one device's outcome was."""

    PASS = "pass"
    REGRESSION = "regression"
    PRODUCT = "product failure"
    INFRASTRUCTURE = "infrastructure failure"
    INCONCLUSIVE = "inconclusive"


# the classes that make a run exit 1 (the product is at fault)
PRODUCT_CLASSES = frozenset({FailureClass.REGRESSION, FailureClass.PRODUCT})


@dataclass(frozen=True)
class Outcome:
    """A device's class in a run, why, and (for a pass after an infrastructure failure) what the first try met."""

    cls: FailureClass
    reason: str = ""
    first_try: str = ""  # the infrastructure failure of the first try, when this outcome is the retry's

    @property
    def passed_on_retry(self) -> bool:
        """True when the first try failed on infrastructure and the retry passed (flakiness)."""
        return self.cls == FailureClass.PASS and bool(self.first_try)

    @property
    def label(self) -> str:
        """One line for people: "pass", "passed on retry (...)", "infrastructure: recovered by soft_reset"."""
        if self.passed_on_retry:
            return f"passed on retry (first try: {self.first_try})"
        if self.cls == FailureClass.INFRASTRUCTURE:
            return f"infrastructure: {self.reason}" if self.reason else "infrastructure failure"
        return f"{self.cls}: {self.reason}" if self.reason else str(self.cls)

    def retried(self, first: Outcome) -> Outcome:
        """This outcome as the retry of the infrastructure failure `first`."""
        return Outcome(self.cls, self.reason, first_try=first.label)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"class": str(self.cls), "reason": self.reason, "label": self.label,
                "passed_on_retry": self.passed_on_retry, "first_try": self.first_try}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        """The stored form back (`to_json`)."""
        return cls(FailureClass(data["class"]), str(data.get("reason", "")), str(data.get("first_try", "")))


PASS = Outcome(FailureClass.PASS)


def infrastructure(reason: str) -> Outcome:
    """An infrastructure failure because `reason`."""
    return Outcome(FailureClass.INFRASTRUCTURE, reason)


def product(reason: str) -> Outcome:
    """A product failure because `reason`."""
    return Outcome(FailureClass.PRODUCT, reason)


def class_of(exc: BaseException) -> FailureClass:
    """The class of a failure that ended in `exc`: the product's when the exception says the agent or model
    failed (ProductFailure: also an agent that answered a request with an error), else the infrastructure's
    (a dead link, a timeout, a failed flash, a lease, a bench-side error)."""
    if isinstance(exc, ProductFailure):
        return FailureClass.PRODUCT
    return FailureClass.INFRASTRUCTURE


def of_exception(exc: BaseException) -> Outcome:
    """The outcome of a device whose work ended in `exc`, with its first line as the reason."""
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    if isinstance(exc, LeaseBusy):
        reason = f"lease not obtained: {reason}"
    elif isinstance(exc, DeviceUnreachable | OSError | TimeoutError) and "link" not in reason:
        reason = f"link lost: {reason}"
    return Outcome(class_of(exc), reason)


def recovered(steps: Iterable[str | None]) -> Outcome:
    """The device stopped answering and the recovery ladder brought it back (by `steps`, one per recovery)."""
    names = [s or "?" for s in steps]
    return infrastructure("recovered by " + ", ".join(names))


def exit_code(outcomes: Iterable[Outcome]) -> ExitCode:
    """1 when a device regressed or the product failed, 3 when only infrastructure failed, else 0."""
    classes = {o.cls for o in outcomes}
    if classes & PRODUCT_CLASSES:
        return ExitCode.FAILED
    if FailureClass.INFRASTRUCTURE in classes:
        return ExitCode.UNREACHABLE
    return ExitCode.OK


def worst(outcomes: Iterable[Outcome]) -> Outcome:
    """The outcome that decides: regression, product, infrastructure, inconclusive, then pass."""
    order = (FailureClass.REGRESSION, FailureClass.PRODUCT, FailureClass.INFRASTRUCTURE, FailureClass.INCONCLUSIVE)
    listed = list(outcomes)
    for cls in order:
        found = next((o for o in listed if o.cls == cls), None)
        if found is not None:
            return found
    return next((o for o in listed if o.passed_on_retry), PASS)

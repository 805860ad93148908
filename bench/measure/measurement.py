"""Typed measurements, OpenHTF style: a name, a unit, a value, and what it rests on. Whether a figure is a
regression is the verdicts' to say (bench.results.verdict, against the baseline runs), not a fixed limit's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Measurement:
    """One measured figure of one device in one run.

    `samples` is how many observations the value rests on; `flags` say why it should be read with care
    (e.g. `too_few_samples_for_p99`)."""

    name: str
    unit: str
    value: float | None
    samples: int | None = None
    flags: tuple[str, ...] = ()
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data["flags"] = list(self.flags)
        return data

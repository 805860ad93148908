"""Long work reported step by step: the progress callback and the outcome of one step (flash, deploy,
image build). Below every layer that does such work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# progress(done, total, what): drivers report long work through this.
Progress = Callable[[int, int, str], None]


def no_progress(done: int, total: int, what: str) -> None:
    """A Progress that shows nothing."""


@dataclass
class StepResult:
    """The outcome of one flash/deploy step on one device."""

    step: str
    ok: bool
    detail: str = ""
    skipped: bool = False  # already up to date
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)  # numbers; an OS step adds its fingerprint

"""Range-checked command-line values: argparse `type=` functions that name what is wrong (exit 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def float_in(low: float, high: float = math.inf, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite float in [low, high] (or (low, high] with `low_open`)."""

    def parse(text: str) -> float:
        value = _number(text)
        if value < low or (low_open and value == low) or value > high:
            bound = f"> {low:g}" if low_open else f">= {low:g}"
            bound += f" and <= {high:g}" if math.isfinite(high) else ""
            raise argparse.ArgumentTypeError(f"{text} is out of range (must be {bound})")
        return value

    return parse


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """A whole number in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" + (f" and <= {high}" if high is not None else "")
            raise argparse.ArgumentTypeError(f"{text} is out of range (must be {bound})")
        return value

    return parse


seconds = float_in(0.0)
"""A duration in seconds, 0 or more."""

positive_seconds = float_in(0.0, low_open=True)
"""A duration in seconds, more than 0."""

port = int_in(0, 65535)
"""A UDP/TCP port (0: any free port)."""

percent = float_in(0.0, 100.0)
"""A percentage."""

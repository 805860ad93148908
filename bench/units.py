"""Figures in the unit that reads best: one definition for the report and the verdicts' reasons."""

from __future__ import annotations

_TIME_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_SIZE_B = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def readable(value: float, unit: str) -> tuple[float, str]:
    """`value` in the time or size unit that needs neither a long run of digits nor leading zeros."""
    if unit in _TIME_US and value != 0:
        us = value * _TIME_US[unit]
        for name, scale in (("s", 1e6), ("ms", 1e3), ("us", 1.0)):
            if abs(us) >= scale * (10 if name == "s" else 1) or name == "us":
                return (us / scale, name) if unit != "s" or name != "s" else (value, unit)
    if unit in _SIZE_B and value != 0:
        b = value * _SIZE_B[unit]
        for name, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1.0)):
            if abs(b) >= scale:
                return b / scale, name
    return value, unit


def figure(value: float | None, unit: str) -> str:
    """`value` with about 4 significant digits in its most readable unit ("9.54 ms", "70.7 MB"); "-" for None."""
    if value is None:
        return "-"
    shown, shown_unit = readable(float(value), unit)
    return f"{shown:.4g} {UNIT_SYMBOLS.get(shown_unit, shown_unit)}".rstrip()


UNIT_SYMBOLS = {"us": "µs"}

"""Figures in the unit that reads best: one definition for the report and the verdicts' reasons."""

from __future__ import annotations

_TIME_US = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_SIZE_B = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}
_BINARY_B = {"KiB": 1024.0, "MiB": 1024.0**2}  # read, never shown


def factor(unit: str, target: str) -> float:
    """What a value in `unit` is multiplied by to be in `target` (ValueError when they measure different things)."""
    if unit == target:
        return 1.0
    for table in (_TIME_US, {**_SIZE_B, **_BINARY_B}):
        if unit in table and target in table:
            return table[unit] / table[target]
    raise ValueError(f"cannot convert {unit!r} to {target!r}")


def convert(value: float | None, unit: str, target: str) -> float | None:
    """`value` (in `unit`) in `target`; None stays None."""
    return None if value is None else float(value) * factor(unit, target)


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


UNIT_SYMBOLS = {"us": "µs", "degC": "°C"}

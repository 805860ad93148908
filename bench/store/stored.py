"""Values read back from the results store, checked: a store damaged by hand, by a disk or by another
program (a `summary` that is not JSON, a `schema_version` of 'abc', an `info` that is a list) is a DamagedStore
naming the table, row and field (exit 2), never a traceback."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from bench.core.errors import ConfigError


class DamagedStore(ConfigError):
    """A value in the results store is not what the bench wrote there (exit 2)."""


def _damaged(store: object, table: str, row: object, field: str, why: str) -> DamagedStore:
    return DamagedStore(
        f"results store {store}: table {table}, row {row}, field {field}: {why}",
        hint="the store was changed outside the bench: restore it from a backup, or fix or delete that row",
        file=str(store),
        field=f"{table}.{field}",
    )


def json_object(text: object, store: object, table: str, row: object, field: str) -> dict[str, Any]:
    """The JSON object stored as `text` (None or '' is {}); a DamagedStore when it is not one."""
    if text is None or text == "":
        return {}
    if not isinstance(text, str | bytes):
        raise _damaged(store, table, row, field, f"a {type(text).__name__}, not JSON text")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _damaged(store, table, row, field, f"not JSON ({str(exc)[:60]})") from None
    if not isinstance(value, dict):
        raise _damaged(store, table, row, field, f"a JSON {type(value).__name__}, not an object")
    return value


def integer(value: object, store: object, table: str, row: object, field: str, low: int = 0) -> int:
    """`value` as a whole number of at least `low` (stored as text or integer); a DamagedStore otherwise."""
    text = str(value).strip()
    if not text.isascii() or not text.lstrip("-").isdigit() or len(text) > 19 or int(text) < low:
        raise _damaged(store, table, row, field, f"{str(value)[:40]!r} is not a whole number >= {low}")
    return int(text)


def number(value: object, store: object, table: str, row: object, field: str) -> float | None:
    """A stored REAL (None stays None); a DamagedStore when it is text or not finite."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _damaged(store, table, row, field, f"{str(value)[:40]!r} is not a finite number")
    return float(value)


def text(value: object, store: object, table: str, row: object, field: str, *, empty: bool = True) -> str:
    """A stored TEXT value (None as '' when `empty`); a DamagedStore when it is a blob, a number or missing."""
    if value is None and empty:
        return ""
    if not isinstance(value, str):
        raise _damaged(store, table, row, field, f"a {type(value).__name__}, not text")
    return value


def timestamp(value: object, store: object, table: str, row: object, field: str) -> str:
    """A stored ISO-8601 time (text); a DamagedStore when it is not one."""
    stamp = text(value, store, table, row, field, empty=False)
    try:
        dt.datetime.fromisoformat(stamp)
    except ValueError:
        raise _damaged(store, table, row, field, f"{stamp[:40]!r} is not an ISO-8601 time") from None
    return stamp


def damaged(store: object, table: str, row: object, field: str, why: str) -> DamagedStore:
    """The error for a value the bench did not write (exit 2), naming the table, row and field."""
    return _damaged(store, table, row, field, why)

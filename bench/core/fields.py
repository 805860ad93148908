"""Reading typed fields from parsed TOML tables, with errors that name where the field is."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal

from bench.core.errors import ConfigError


def typed(raw: dict[str, Any], key: str, kind: Any, where: str, default: Any) -> Any:
    """`raw[key]` checked to be a `kind` (an int is accepted for a float, a bool never for an int; a
    `Literal[...]` takes one of its words); `default` when absent; a ConfigError naming `where` and the field
    otherwise."""
    if key not in raw:
        return default
    value = raw[key]
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        if value not in choices:
            raise ConfigError(
                f"{where}: field {key!r}: unknown value {value!r}", hint=f"one of: {', '.join(map(str, choices))}"
            )
        return value
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise ConfigError(f"{where}: field {key!r}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return value


def resolve_path(value: str | None, base_dir: Path) -> Path | None:
    """A path from a config file: `~` expanded, relative ones taken from `base_dir` (the file's folder)."""
    if value is None:
        return None
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()

"""Reading typed fields from parsed TOML tables, with errors that name where the field is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.errors import ConfigError


def typed(raw: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    """`raw[key]` checked to be a `kind` (an int is accepted for a float, a bool never for an int);
    `default` when absent; a ConfigError naming `where` and the field otherwise."""
    if key not in raw:
        return default
    value = raw[key]
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

"""Reading typed fields from parsed TOML tables, with errors that name where the field is; and the one way a
group of settings is declared and validated (`Declared`, `settings_from`): every table of a fleet file (a
device's own fields, its link fields, its kind's settings, its `[device.os]` and `[device.qemu]`, its power
backend's and energy meter's, the fleet's `[bench]`, `[lab]` and `[results]`) is a frozen dataclass whose fields
carry their checks."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Self, TypeVar, cast

from bench.core.errors import ConfigError

S = TypeVar("S")
REQUIRED: Any = dataclasses.MISSING  # the default of a declared setting the fleet file must give


def typed(raw: dict[str, Any], key: str, kind: Any, where: str, default: Any, *, shown: str | None = None) -> Any:
    """`raw[key]` checked to be a `kind` (an int is accepted for a float, a bool never for an int; a
    `Literal[...]` takes one of its words; a `Path` is given as text; a `tuple[X, ...]` as an array of X, a
    `dict[str, X]` as a table); `default` when absent; a ConfigError naming `where` and the field (as `shown`,
    by default `key`) otherwise."""
    if key not in raw:
        return default
    value = raw[key]
    name = shown or key
    origin = typing.get_origin(kind)
    if origin in (tuple, dict):
        return _collection(value, kind, f"{where}: field {name!r}")
    if kind is Path:
        return Path(typed(raw, key, str, where, default, shown=shown))
    if origin is Literal:
        choices = typing.get_args(kind)
        if value not in choices:
            raise ConfigError(
                f"{where}: field {name!r}: unknown value {value!r}", hint=f"one of: {', '.join(map(str, choices))}"
            )
        return value
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise ConfigError(f"{where}: field {name!r}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return value


def _collection(value: Any, kind: Any, where: str) -> Any:
    """A `tuple[X, ...]` (a TOML array of X, as a tuple) or a `dict[str, X]` (a TOML table) checked item by item
    (`Any`: items unchecked)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    item = args[0 if origin is tuple else -1] if args else Any
    items = value.values() if isinstance(value, dict) else value
    form = "an array" if origin is tuple else "a table"
    if not isinstance(value, list if origin is tuple else dict) or (
        item is not Any and not all(isinstance(v, item) and not isinstance(v, bool) for v in items)
    ):
        of = "" if item is Any else f" of {item.__name__}"
        raise ConfigError(f"{where}: expected {form}{of}, got {value!r}"[:200])
    return tuple(value) if origin is tuple else dict(value)


class SettingError(ValueError):
    """A setting out of its range or form; `name` is the field (`settings_from` adds the file and device)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CHECKS = ("range", "name", "pattern", "choices")  # the field metadata Declared.__post_init__ enforces


def ranged(default: float | None, low: float, high: float) -> Any:
    """A numeric setting's field: its default (REQUIRED: the table must give it) and the range [low, high] a
    fleet file may set."""
    return field(default=default, metadata={"range": (low, high)})


def chosen(default: str, choices: tuple[str, ...]) -> Any:
    """A setting that is one of `choices`."""
    return field(default=default, metadata={"choices": choices})


def named(default: str, *, or_path: str = "") -> Any:
    """A setting that becomes part of a file name: letters, digits, '.', '_', '-' only (no '/', no '..');
    with `or_path` (a file suffix) also a path: a value with a '/' or that suffix names a file, which the
    fleet loader takes from the fleet file's folder (a model file under test)."""
    return field(default=default, metadata={"name": True, "or_path": or_path})


def file_path(default: str = "", keywords: tuple[str, ...] = ()) -> Any:
    """A setting that names a file ("" = the kind's own): the fleet loader takes it from the fleet file's folder.
    A value in `keywords` names something the bench makes itself, not a file."""
    return field(default=default, metadata={"path": True, "keywords": keywords})


def matching(default: str | None, pattern: str, form: str) -> Any:
    """A text setting that must match the regular expression `pattern` whole; `form` ends the error ("is not a
    location (e.g. 1-1.4)")."""
    return field(default=default, metadata={"pattern": pattern, "form": form})


@dataclass(frozen=True)
class Declared:
    """Settings declared as a frozen dataclass, each field with its check (`ranged`, `chosen`, `named`,
    `matching`, `file_path`), enforced when the settings are made (SettingError naming the field); `check()`
    adds rules between fields. Every table of a fleet file is Declared (the module's docstring lists them), and
    `settings_from` makes each from its table.

    A check is part of its field, and a subclass cannot lose it: one that overrides a field with a plain default
    (`fps_target: int = 20`) keeps the base field's check, and a number with no range at all is refused when the
    class is made (TypeError)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Keep the checks of every field a subclass overrides with a plain default; refuse a number without a range."""
        super().__init_subclass__(**kwargs)
        inherited = {f.name: f for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
                     for f in dataclasses.fields(base)}  # fmt: skip
        for name, annotation in inspect.get_annotations(cls).items():
            value = cls.__dict__.get(name, dataclasses.MISSING)
            base = inherited.get(name)
            own = value.metadata if isinstance(value, dataclasses.Field) else {}
            if base is not None and not any(k in own for k in _CHECKS) and any(k in base.metadata for k in _CHECKS):
                if isinstance(value, dataclasses.Field):
                    value.metadata = base.metadata
                else:
                    setattr(cls, name, field(default=value, metadata=base.metadata))
                own = base.metadata
            if getattr(annotation, "__name__", annotation) in ("int", "float") and "range" not in own:
                raise TypeError(f"{cls.__name__}.{name}: a numeric setting needs a range (ranged(default, low, high))")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            low, high = f.metadata.get("range", (-math.inf, math.inf))
            if isinstance(value, int | float) and not isinstance(value, bool) and not low <= value <= high:
                raise SettingError(f.name, f"{value!r} is out of range (must be {low} to {high})")
            choices = f.metadata.get("choices")
            if choices and value not in choices:
                raise SettingError(f.name, f"{value!r} is not one of {', '.join(choices)}")
            if f.metadata.get("name") and (not _SAFE_NAME.match(value) or ".." in value):
                path_ok = f.metadata.get("or_path") and value.startswith("/") and ".." not in value.split("/")
                if not path_ok:
                    raise SettingError(f.name, f"{value!r} is not a plain name (letters, digits, '.', '_', '-')")
            pattern = f.metadata.get("pattern")
            if pattern and isinstance(value, str) and not re.fullmatch(pattern, value):
                raise SettingError(f.name, f"{value[:40]!r} {f.metadata['form']}")
        self.check()

    def check(self) -> None:
        """Rules between fields (SettingError naming the field to change); none by default."""

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)


def setting_types(cls: type[Declared]) -> dict[str, Any]:
    """Field name -> the type `typed` checks its fleet-file value against (`X | None`: X)."""
    hints = typing.get_type_hints(cls)

    def checked(hint: Any) -> Any:
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            return next(a for a in typing.get_args(hint) if a is not type(None))
        return hint

    return {f.name: checked(hints[f.name]) for f in dataclasses.fields(cls)}


def settings_from(
    cls: type[Declared],
    raw: dict[str, Any],
    where: str,
    *,
    table: str = "",
    what: str = "",
    skip: Iterable[str] = (),
    adjust: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Any:
    """A `cls` from the fleet-file values in `raw`, each checked by its type and its declared check; every error
    a ConfigError naming `where` (file and device) and the field. With `table` (its fields are `table.key`,
    `what` names whose fields they are), a key of `raw` that is not a field, nor in `skip`, is refused too.
    `adjust(values)` may replace typed values before the settings are made (paths taken from the fleet's folder)."""
    kinds = setting_types(cls)
    prefix = f"{table}." if table else ""
    if table:
        for key in raw:
            if key not in kinds and key not in skip:
                raise ConfigError(
                    f"{where}: field '{prefix}{key}': not a field of {what}", hint=f"known: {', '.join(kinds)}"
                )
    values = {key: typed(raw, key, kind, where, None, shown=prefix + key) for key, kind in kinds.items() if key in raw}
    required = [f.name for f in dataclasses.fields(cls) if f.default is REQUIRED and f.default_factory is REQUIRED]
    for name in required:
        if name not in values:
            raise ConfigError(f"{where}: field '{prefix}{name}': missing", hint=f"{what} needs {', '.join(required)}")
    if adjust is not None:
        values.update(adjust(values))
    try:
        return cls(**values)
    except SettingError as exc:
        raise ConfigError(f"{where}: field '{prefix}{exc.name}': {exc}") from None


def driver_settings(
    raw: Any, table: str, drivers: dict[str, type[Declared]], where: str, *, what: str
) -> tuple[str, Any]:
    """(driver name, its settings) from a `table = { driver = NAME, ... }` fleet-file table: the driver is one of
    `drivers` (name -> its settings class; `what` is what a driver is), each other key one of its fields."""
    if not isinstance(raw, dict):
        example = next(iter(drivers))
        raise ConfigError(f'{where}: field {table!r}: must be a table, e.g. {table} = {{ driver = "{example}", ... }}')
    name = raw.get("driver")
    if name not in drivers:
        shown = "missing" if name is None else f"unknown driver {name!r}"
        raise ConfigError(f"{where}: field '{table}.driver': {shown}", hint=f"drivers: {', '.join(drivers)}")
    return name, settings_from(drivers[name], raw, where, table=table, what=f"{what} {name!r}", skip=("driver",))


def resolve_path(value: str | None, base_dir: Path) -> Path | None:
    """A path from a config file: `~` expanded, relative ones taken from `base_dir` (the file's folder)."""
    if value is None:
        return None
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base_dir / p).resolve()


class Configured(Generic[S]):
    """One device's instrument set up by a fleet-file table (a power backend, an energy meter): `spec` holds the
    table's validated settings, an `S`."""

    def __init__(self, device: str, spec: Any) -> None:
        self.device = device
        self.spec = spec

    @property
    def settings(self) -> S:
        """The validated settings of its fleet-file table."""
        return cast(S, self.spec.settings)


def not_option(value: str, what: str) -> str:
    """`value`, refused (ConfigError naming `what`) when a program it is passed to would read it as an option:
    a leading `-` (bisect --git='--output=FILE' once reached git as an option)."""
    if str(value).startswith("-"):
        raise ConfigError(
            f"{what} {value!r}: a value may not start with '-' (a program would read it as an option)",
            hint=f"give {what} a name, path or ref that does not start with '-'",
        )
    return value

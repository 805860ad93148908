"""Baseline thresholds file (TOML): which metrics a run is compared on, and how strictly.

The bundled defaults are `fixtures/baselines/default.toml`; every field is validated and an error
names the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import ConfigError
from bench.paths import BASELINES_DIR
from bench.results.runview import SOURCES
from bench.results.statistics import STATISTICS

DEFAULT_THRESHOLDS = BASELINES_DIR / "default.toml"
TESTS = ("mann-whitney", "permutation")
WORSE = ("higher", "lower")


@dataclass(frozen=True)
class MetricRule:
    """How one metric is compared: which samples, which statistic, which test, and the thresholds."""

    name: str
    title: str
    source: str
    statistic: str
    worse: str  # "higher" or "lower"
    threshold_pct: float  # minimum effect size, percent change of the statistic
    test: str  # "mann-whitney" or "permutation"
    min_samples: int
    alpha: float
    resamples: int


@dataclass(frozen=True)
class Thresholds:
    """All metric rules of one thresholds file."""

    path: Path
    rules: tuple[MetricRule, ...]

    def rule(self, name: str) -> MetricRule:
        """The rule called `name` (KeyError if absent)."""
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """Read and validate a thresholds file (default: the bundled one)."""
    file = Path(path) if path else DEFAULT_THRESHOLDS
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{file}: thresholds file not found", hint="pass an existing file to --thresholds") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return parse_thresholds(data, file)


def parse_thresholds(data: dict[str, Any], file: Path) -> Thresholds:
    """Validate the parsed TOML `data` of `file` into Thresholds."""
    unknown = set(data) - {"defaults", "metrics"}
    if unknown:
        raise ConfigError(f"{file}: unknown section(s) {sorted(unknown)}; expected [defaults] and [metrics.NAME]")
    defaults = _table(data.get("defaults", {}), file, "defaults")
    _no_unknown(defaults, {"alpha", "resamples"}, file, "defaults")
    alpha = _number(defaults.get("alpha", 0.01), file, "defaults.alpha", low=0.0, high=0.5, open_low=True)
    resamples = _integer(defaults.get("resamples", 1000), file, "defaults.resamples", low=100)
    metrics = _table(data.get("metrics"), file, "metrics")
    if not metrics:
        raise ConfigError(f"{file}: no [metrics.NAME] tables; a thresholds file needs at least one metric")
    rules = tuple(
        _rule(name, _table(body, file, f"metrics.{name}"), file, alpha, resamples) for name, body in metrics.items()
    )
    return Thresholds(file, rules)


_RULE_FIELDS = {"title", "source", "statistic", "worse", "threshold_pct", "test", "min_samples", "alpha"}


def _rule(name: str, body: dict[str, Any], file: Path, alpha: float, resamples: int) -> MetricRule:
    where = f"metrics.{name}"
    _no_unknown(body, _RULE_FIELDS, file, where)
    for required in ("source", "statistic", "worse", "threshold_pct", "test", "min_samples"):
        if required not in body:
            raise ConfigError(f"{file}: {where}.{required} is missing")
    source = _choice(body["source"], SOURCES, file, f"{where}.source")
    statistic = _choice(body["statistic"], tuple(STATISTICS), file, f"{where}.statistic")
    test = _choice(body["test"], TESTS, file, f"{where}.test")
    if test == "mann-whitney" and not STATISTICS[statistic].location:
        raise ConfigError(
            f"{file}: {where}.test: mann-whitney compares locations; it cannot judge statistic '{statistic}'",
            hint='use test = "permutation" for percentiles other than the median and for spread',
        )
    return MetricRule(
        name=name,
        title=str(body.get("title", name)),
        source=source,
        statistic=statistic,
        worse=_choice(body["worse"], WORSE, file, f"{where}.worse"),
        threshold_pct=_number(body["threshold_pct"], file, f"{where}.threshold_pct", low=0.0, high=1000.0),
        test=test,
        min_samples=_integer(body["min_samples"], file, f"{where}.min_samples", low=2),
        alpha=_number(body.get("alpha", alpha), file, f"{where}.alpha", low=0.0, high=0.5, open_low=True),
        resamples=resamples,
    )


def _table(value: Any, file: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: [{where}] must be a table")
    return value


def _no_unknown(body: dict[str, Any], allowed: set[str], file: Path, where: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ConfigError(f"{file}: {where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")


def _choice(value: Any, allowed: tuple[str, ...], file: Path, where: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{file}: {where} = {value!r} is not one of {list(allowed)}")
    return str(value)


def _number(value: Any, file: Path, where: str, *, low: float, high: float, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{file}: {where} must be a number, not {value!r}")
    if value < low or value > high or (open_low and value == low):
        bound = "(" if open_low else "["
        raise ConfigError(f"{file}: {where} = {value} is outside {bound}{low}, {high}]")
    return float(value)


def _integer(value: Any, file: Path, where: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{file}: {where} must be an integer, not {value!r}")
    if value < low:
        raise ConfigError(f"{file}: {where} = {value} must be at least {low}")
    return value

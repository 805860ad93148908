"""Baseline thresholds file (TOML): which stored measurements a run is judged on, against how many earlier
runs, and how strictly.

The bundled defaults are `fixtures/baselines/default.toml`; every field is validated and an error names the
file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core.errors import ConfigError
from bench.core.inputs import load_toml
from bench.core.paths import BASELINES_DIR
from bench.measure.catalogue import BENCH, metric

DEFAULT_THRESHOLDS = BASELINES_DIR / "default.toml"
WORSE = ("higher", "lower")


@dataclass(frozen=True)
class MetricRule:
    """How one metric is judged: which stored measurement, which direction is worse, and the thresholds."""

    name: str
    title: str  # the measurement's catalogue title
    measurement: str  # name of the stored per-run measurement (bench/measure/catalogue.py): one definition
    worse: str  # "higher" or "lower"
    threshold_pct: float  # minimum effect size, percent change against the baseline runs' mean
    min_samples: int  # the run's measurement must rest on at least this many observations
    alpha: float  # one-sided significance of the run against the spread of the baseline runs
    host_timed: bool = True  # a virtual device's figure moves with bench-host load ("inconclusive" when busy)
    bench_clock: bool = False  # on the bench's clock (the catalogue says): meaningless on an icount guest
    replay_paced: bool = False  # depends on when the replay's inputs arrived: inconclusive when the replay was off pace
    icount_threshold_pct: float | None = None  # the floor of a figure counted in instructions (judge.counted)


@dataclass(frozen=True)
class HostRules:
    """When the bench host counts as busy during a run."""

    busy_others_pct: float = 25.0  # CPU used by processes outside the bench, % of the host's capacity
    busier_margin_pct: float = 10.0  # ...and that much more than during any of the baseline runs
    starved_others_pct: float = 75.0  # or this much, whatever the baseline runs had: the bench was starved


@dataclass(frozen=True)
class AlertRules:
    """How alerts (bench.alerts) close, reopen, fail a night and fall overdue."""

    fixed_after_nights: int = 3  # an alert is fixed after this many nights in a row inside the baseline's spread
    reopen_nights: int = 14  # a fixed alert whose step comes back within this many nights of its fix reopens
    untriaged_days: float = 3.0  # an alert untriaged for longer than this is flagged overdue
    fail_acknowledged: bool = False  # whether an acknowledged alert still makes the night exit 1


@dataclass(frozen=True)
class Thresholds:
    """All metric rules of one thresholds file, the baseline window size, the host rules and the alert rules."""

    path: Path
    rules: tuple[MetricRule, ...]
    baseline_runs: int = 5
    host: HostRules = HostRules()
    alerts: AlertRules = AlertRules()

    def rule(self, name: str) -> MetricRule:
        """The rule called `name` (KeyError if absent)."""
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)


def load_thresholds(path: str | Path | None = None) -> Thresholds:
    """Read and validate a thresholds file (default: the bundled one)."""
    file = Path(path) if path else DEFAULT_THRESHOLDS
    data = load_toml(file, "thresholds file", hint="pass an existing TOML file to --thresholds")
    return parse_thresholds(data, file)


def parse_thresholds(data: dict[str, Any], file: Path) -> Thresholds:
    """Validate the parsed TOML `data` of `file` into Thresholds."""
    unknown = set(data) - {"defaults", "host", "alerts", "metrics"}
    if unknown:
        raise ConfigError(
            f"{file}: unknown section(s) {sorted(unknown)}; expected [defaults], [host], [alerts] and [metrics.NAME]"
        )
    defaults = _table(data.get("defaults", {}), file, "defaults")
    _no_unknown(defaults, {"alpha", "baseline_runs"}, file, "defaults")
    alpha = _number(defaults.get("alpha", 0.01), file, "defaults.alpha", low=0.0, high=0.5, open_low=True)
    # more runs than a window ever holds would leave every verdict waiting for its baseline, silently
    runs = _integer(defaults.get("baseline_runs", 5), file, "defaults.baseline_runs", low=3, high=MAX_BASELINE_RUNS)
    host = _table(data.get("host", {}), file, "host")
    _no_unknown(host, {"busy_others_pct", "busier_margin_pct", "starved_others_pct"}, file, "host")
    busy = _number(host.get("busy_others_pct", 25.0), file, "host.busy_others_pct", low=0.0, high=100.0)
    margin = _number(host.get("busier_margin_pct", 10.0), file, "host.busier_margin_pct", low=0.0, high=100.0)
    starved = _number(host.get("starved_others_pct", 75.0), file, "host.starved_others_pct", low=0.0, high=100.0)
    metrics = _table(data.get("metrics"), file, "metrics")
    if not metrics:
        raise ConfigError(f"{file}: no [metrics.NAME] tables; a thresholds file needs at least one metric")
    rules = tuple(_rule(name, _table(body, file, f"metrics.{name}"), file, alpha) for name, body in metrics.items())
    return Thresholds(file, rules, runs, HostRules(busy, margin, starved), _alert_rules(data.get("alerts", {}), file))


def _alert_rules(value: Any, file: Path) -> AlertRules:
    """The [alerts] table, validated (every field optional)."""
    body = _table(value, file, "alerts")
    _no_unknown(body, {"fixed_after_nights", "reopen_nights", "untriaged_days", "fail_acknowledged"}, file, "alerts")
    fail = body.get("fail_acknowledged", False)
    if not isinstance(fail, bool):
        raise ConfigError(f"{file}: alerts.fail_acknowledged must be true or false, not {fail!r}")
    return AlertRules(
        fixed_after_nights=_integer(
            body.get("fixed_after_nights", 3), file, "alerts.fixed_after_nights", low=1, high=365
        ),
        reopen_nights=_integer(body.get("reopen_nights", 14), file, "alerts.reopen_nights", low=0, high=3650),
        untriaged_days=_number(body.get("untriaged_days", 3.0), file, "alerts.untriaged_days", low=0.0, high=365.0),
        fail_acknowledged=fail,
    )


_RULE_FIELDS = {"measurement", "worse", "threshold_pct", "min_samples", "alpha", "host_timed", "replay_paced",
                "icount_threshold_pct"}  # fmt: skip


def _rule(name: str, body: dict[str, Any], file: Path, alpha: float) -> MetricRule:
    where = f"metrics.{name}"
    _no_unknown(body, _RULE_FIELDS, file, where)
    for required in ("measurement", "worse", "threshold_pct"):
        if required not in body:
            raise ConfigError(f"{file}: {where}.{required} is missing")
    measurement = body["measurement"]
    try:
        entry = metric(measurement) if isinstance(measurement, str) else None
    except KeyError:
        entry = None
    if entry is None:
        raise ConfigError(
            f"{file}: {where}.measurement = {measurement!r} is not a stored measurement",
            hint="name one of bench/measure/catalogue.py (e.g. decision_latency_p50)",
        )
    flags = {key: body.get(key, default) for key, default in (("host_timed", True), ("replay_paced", False))}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{file}: {where}.{key} must be true or false, not {value!r}")
    icount_floor = body.get("icount_threshold_pct")
    return MetricRule(
        name=name,
        title=entry.title,
        measurement=measurement,
        worse=_choice(body["worse"], WORSE, file, f"{where}.worse"),
        threshold_pct=_number(body["threshold_pct"], file, f"{where}.threshold_pct", low=0.0, high=1000.0),
        min_samples=_integer(body.get("min_samples", 1), file, f"{where}.min_samples", low=1),
        alpha=_number(body.get("alpha", alpha), file, f"{where}.alpha", low=0.0, high=0.5, open_low=True),
        host_timed=flags["host_timed"],
        bench_clock=entry.clock == BENCH,
        replay_paced=flags["replay_paced"],
        icount_threshold_pct=None
        if icount_floor is None
        else _number(icount_floor, file, f"{where}.icount_threshold_pct", low=0.0, high=1000.0),
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


MAX_BASELINE_RUNS = 100  # a baseline window of over three months of nightly runs


def _integer(value: Any, file: Path, where: str, *, low: int, high: int = 1_000_000) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{file}: {where} must be an integer, not {value!r}", file=str(file), field=where)
    if value < low:
        raise ConfigError(f"{file}: {where} = {value} must be at least {low}", file=str(file), field=where)
    if value > high:
        raise ConfigError(f"{file}: {where} = {value} must be at most {high}", file=str(file), field=where)
    return value

"""Baseline thresholds file: defaults and validation errors that name the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import ConfigError
from bench.results.thresholds import DEFAULT_THRESHOLDS, load_thresholds


def test_bundled_defaults_carry_the_product_thresholds() -> None:
    rules = load_thresholds()
    assert rules.path == DEFAULT_THRESHOLDS
    assert rules.rule("first_frame_ms").threshold_pct == 15
    assert rules.rule("memory_peak_mb").threshold_pct == 10
    assert {"latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "jitter_std_us"} <= {r.name for r in rules.rules}


GOOD = """
[metrics.lat]
source = "latency_ms"
statistic = "p99"
worse = "higher"
threshold_pct = 10
test = "permutation"
min_samples = 662
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("threshold_pct = 10", 'threshold_pct = "ten"'), "metrics.lat.threshold_pct must be a number"),
        (('statistic = "p99"', 'statistic = "p42"'), "metrics.lat.statistic = 'p42' is not one of"),
        (('test = "permutation"', 'test = "mann-whitney"'), "metrics.lat.test: mann-whitney compares locations"),
        (("min_samples = 662", "min_samples = 1"), "metrics.lat.min_samples = 1 must be at least 2"),
        (('worse = "higher"\n', ""), "metrics.lat.worse is missing"),
        (("min_samples = 662", "min_samples = 662\nthreshold = 3"), "metrics.lat: unknown field(s) ['threshold']"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    file = tmp_path / "mine.toml"
    file.write_text(GOOD.replace(*edit))
    with pytest.raises(ConfigError) as caught:
        load_thresholds(file)
    assert str(file) in str(caught.value)
    assert message in str(caught.value)


def test_missing_and_broken_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="thresholds file not found"):
        load_thresholds(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[metrics\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_thresholds(tmp_path / "bad.toml")
    (tmp_path / "alpha.toml").write_text("[defaults]\nalpha = 0\n" + GOOD)
    with pytest.raises(ConfigError, match=r"defaults.alpha = 0 is outside \(0.0, 0.5\]"):
        load_thresholds(tmp_path / "alpha.toml")

"""Baseline thresholds file: defaults and validation errors that name the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.errors import ConfigError
from bench.results.thresholds import DEFAULT_THRESHOLDS, load_thresholds


def test_bundled_defaults_carry_the_product_thresholds() -> None:
    rules = load_thresholds()
    assert rules.path == DEFAULT_THRESHOLDS
    assert rules.baseline_runs == 5
    assert rules.rule("first_frame_ms").threshold_pct == 15
    assert rules.rule("memory_peak").threshold_pct == 10
    assert rules.rule("memory_peak").host_timed is False
    assert rules.rule("inference_p50").measurement == "inference_latency_p50"  # device-side inference is judged
    assert {"latency_p50", "latency_p99", "fps", "jitter_std"} <= {r.name for r in rules.rules}


GOOD = """
[defaults]
baseline_runs = 7

[metrics.lat]
measurement = "decision_latency_p99"
worse = "higher"
threshold_pct = 10
min_samples = 662
"""


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("threshold_pct = 10", 'threshold_pct = "ten"'), "metrics.lat.threshold_pct must be a number"),
        (('worse = "higher"', 'worse = "up"'), "metrics.lat.worse = 'up' is not one of"),
        (('measurement = "decision_latency_p99"', "measurement = 3"), "metrics.lat.measurement = 3 is not a stored"),
        (("min_samples = 662", "min_samples = 0"), "metrics.lat.min_samples = 0 must be at least 1"),
        (("baseline_runs = 7", "baseline_runs = 2"), "defaults.baseline_runs = 2 must be at least 3"),
        (('worse = "higher"\n', ""), "metrics.lat.worse is missing"),
        (("min_samples = 662", "min_samples = 662\nthreshold = 3"), "metrics.lat: unknown field(s) ['threshold']"),
        (("min_samples = 662", "min_samples = 662\nhost_timed = 1"), "metrics.lat.host_timed must be true or false"),
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
    with pytest.raises(ConfigError, match=r"thresholds file .*nope\.toml does not exist"):
        load_thresholds(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[metrics\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_thresholds(tmp_path / "bad.toml")
    (tmp_path / "alpha.toml").write_text(GOOD.replace("[defaults]", "[defaults]\nalpha = 0"))
    with pytest.raises(ConfigError, match=r"defaults.alpha = 0 is outside \(0.0, 0.5\]"):
        load_thresholds(tmp_path / "alpha.toml")


def test_window_size_and_host_rule_are_read(tmp_path: Path) -> None:
    file = tmp_path / "mine.toml"
    file.write_text(GOOD + "\n[host]\nbusy_others_pct = 40\n")
    rules = load_thresholds(file)
    assert rules.baseline_runs == 7 and rules.host.busy_others_pct == 40

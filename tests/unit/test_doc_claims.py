"""Claims of docs/cli.md and docs/ota.md that a test can hold: an unknown device name is a usage error naming
the fleet's devices, and the model store's default follows the bench cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.config.fleet import load_fleet
from bench.core.errors import ConfigError, ExitCode
from bench.ota.store import default_store_dir
from tests.conftest import REPO


def test_an_unknown_device_is_a_usage_error_listing_the_fleets_devices():
    fleet = load_fleet(REPO / "fixtures" / "fleets" / "virtual.toml")
    with pytest.raises(ConfigError) as raised:
        fleet.select(["c6-z"])
    assert raised.value.exit_code == ExitCode.USAGE == 2
    assert "c6-z" in str(raised.value) and all(d.name in raised.value.hint for d in fleet)


def test_the_model_store_defaults_to_the_bench_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("HILBENCH_OTA_STORE", raising=False)
    monkeypatch.setenv("HILBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert default_store_dir() == tmp_path / "cache" / "ota-store"
    monkeypatch.setenv("HILBENCH_OTA_STORE", str(tmp_path / "store"))
    assert default_store_dir() == tmp_path / "store"

"""Alerts in pytest's reports: the nightly's open alerts (bench.alerts) of the devices a test session ran on.

A device test says what the product does now; an alert says what the nightly already found on that device and
whether someone owns it. A test that runs on a device (the `device` fixture's parameter) gets the JUnit XML
properties `hilbench device` and, when the device has open alerts, `hilbench alerts` ("#3 untriaged inference
time P50 +41.0%; ..."). The terminal summary lists the open alerts of the devices the session ran on, untriaged
ones first, and flags those untriaged for longer than the thresholds' `untriaged_days`.

The alerts are read from `--results PATH` (a SQLite file or a postgresql:// URL), else from the fleet's `[bench]
results` when that store exists: a session never creates a store. Loaded by `bench.pytest_plugin`."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.alerts import table
from bench.alerts.model import OPEN, UNTRIAGED, Alert
from bench.core.errors import BenchError
from bench.results.thresholds import AlertRules
from bench.store.dialect import is_postgres
from bench.store.results import open_store

DEVICE_PROPERTY = "hilbench device"
ALERTS_PROPERTY = "hilbench alerts"
_ALERTS = pytest.StashKey[dict[str, list[Alert]]]()
_USED = pytest.StashKey[set[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """--results: where the nightly's alerts are read from."""
    group = parser.getgroup("hilbench")
    group.addoption("--results", metavar="PATH", default=None,
                    help="results store whose open alerts of the tested devices the report shows"
                         " (default: the fleet's [bench] results, when it exists)")  # fmt: skip


def open_alerts(config: pytest.Config) -> dict[str, list[Alert]]:
    """Device -> its open alerts (untriaged first), read once per session; {} without a store."""
    if _ALERTS not in config.stash:
        config.stash[_ALERTS] = _read(config)
    return config.stash[_ALERTS]


def _read(config: pytest.Config) -> dict[str, list[Alert]]:
    location = config.getoption("--results") or _fleet_store(config)
    if not location or not (is_postgres(str(location)) or Path(location).is_file()):
        return {}
    try:
        with open_store(location) as store:
            alerts = table.select(store, states=OPEN)
    except BenchError as exc:
        config.issue_config_time_warning(pytest.PytestWarning(f"hilbench alerts not read: {exc.message}"), 2)
        return {}
    by_device: dict[str, list[Alert]] = {}
    for a in sorted(alerts, key=lambda a: (a.state != UNTRIAGED, a.id)):
        by_device.setdefault(a.device, []).append(a)
    return by_device


def _fleet_store(config: pytest.Config) -> str | None:
    from bench.pytest_plugin import _fleet  # the session's fleet, loaded once

    try:
        return _fleet(config).bench.results or None
    except pytest.UsageError:
        return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A device test's JUnit properties: its device, and that device's open alerts."""
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("device") if callspec is not None else None
    if not isinstance(name, str):
        return
    item.user_properties.append((DEVICE_PROPERTY, name))
    alerts = open_alerts(item.config).get(name, [])
    if alerts:
        item.user_properties.append((ALERTS_PROPERTY, "; ".join(_short(a) for a in alerts)))


def pytest_configure(config: pytest.Config) -> None:
    """Register what notes the devices tests ran on and lists their alerts at the end."""
    config.pluginmanager.register(AlertsSummary(config), "hilbench-alerts")


class AlertsSummary:
    """The devices this session's tests ran on (from their reports' properties, so also under pytest-xdist), and
    their open alerts in the terminal summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.used: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Note the device a test ran on."""
        self.used.update(str(value) for key, value in report.user_properties if key == DEVICE_PROPERTY)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """The open alerts of the devices this session's tests ran on."""
        if not self.used or hasattr(self.config, "workerinput"):
            return
        by_device = open_alerts(self.config)
        shown = sorted((a for device in self.used for a in by_device.get(device, [])),
                       key=lambda a: (a.state != UNTRIAGED, a.id))  # fmt: skip
        if not shown:
            return
        days = _untriaged_days()
        terminalreporter.section("hilbench alerts on the tested devices (hilbench alerts show N)")
        for a in shown:
            late = " · UNTRIAGED TOO LONG" if a.overdue(days) else ""
            terminalreporter.write_line(a.line(width=79 - len(late)) + late)


def _short(a: Alert) -> str:
    return f"#{a.id} {a.state} {a.what(120)}"


def _untriaged_days() -> float:
    from bench.results.thresholds import load_thresholds

    try:
        return load_thresholds().alerts.untriaged_days
    except BenchError:
        return AlertRules().untriaged_days

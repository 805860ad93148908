"""Measurements in pytest's reports: the `record_measurement` fixture.

`record_measurement(name, value, unit, samples=...)` in a test
- adds a JUnit XML property `NAME [UNIT]` = value to the test case (`--junitxml`), for CI systems;
- with pytest-html (`--html`), adds a table of the test's measurements and, for those given raw
  `samples`, a small inline-SVG CDF plot to the test's row in the HTML report.

Loaded by `bench.pytest_plugin` (its `pytest_plugins`); or on its own with `-p bench.pytest_measure`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

import numpy as np
import pytest

from bench.report import svg
from bench.report.downsample import cdf_points


@dataclass(frozen=True)
class RecordedMeasurement:
    """One value a test measured, with its unit and (optionally) the raw samples behind it."""

    name: str
    value: float
    unit: str
    samples: tuple[float, ...] | None = None


MEASUREMENTS = pytest.StashKey[list[RecordedMeasurement]]()
RecordMeasurement = Callable[..., None]


@pytest.fixture
def record_measurement(
    request: pytest.FixtureRequest, record_property: Callable[[str, object], None]
) -> RecordMeasurement:
    """`record_measurement(name, value, unit, samples=None)`: keep a measurement in the JUnit XML and HTML reports."""
    recorded = request.node.stash.setdefault(MEASUREMENTS, [])

    def record(name: str, value: float, unit: str, samples: Sequence[float] | None = None) -> None:
        if not name or not isinstance(name, str):
            raise ValueError(f"record_measurement: name must be a non-empty string, not {name!r}")
        if not unit or not isinstance(unit, str):
            raise ValueError(
                f"record_measurement({name!r}): unit must be a non-empty string such as 'ms', not {unit!r}"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"record_measurement({name!r}): value must be a finite number, not {value!r}")
        kept = tuple(float(s) for s in samples) if samples is not None else None
        recorded.append(RecordedMeasurement(name, float(value), unit, kept))
        record_property(f"{name} [{unit}]", value)

    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Attach the test's measurements to its pytest-html row (call phase, when pytest-html is active)."""
    outcome = yield
    report = outcome.get_result()
    measured = item.stash.get(MEASUREMENTS, [])
    if report.when != "call" or not measured or item.config.pluginmanager.getplugin("html") is None:
        return
    from pytest_html import extras

    report.extras = [*getattr(report, "extras", []), extras.html(measurements_html(measured))]


def measurements_html(measured: list[RecordedMeasurement]) -> str:
    """An HTML table of measurements, followed by a CDF plot for each one that has samples."""
    rows = "".join(
        f"<tr><td>{escape(m.name)}</td><td style='text-align:right'>{m.value:.6g} {escape(m.unit)}</td>"
        f"<td style='text-align:right'>{len(m.samples) if m.samples else ''}</td></tr>"
        for m in measured
    )
    table = (
        "<table class='hilbench-measurements'><thead><tr><th>measurement</th><th>value</th><th>samples</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )
    plots = "".join(sample_plot(m) for m in measured if m.samples)
    return f"<div class='hilbench'>{table}{plots}</div>"


def sample_plot(m: RecordedMeasurement) -> str:
    """A small CDF of a measurement's samples, as inline SVG."""
    x, y = cdf_points(np.asarray(m.samples, dtype=float), points=150)
    line = svg.Line(x, y, label=m.name, step=True)
    plot = svg.Plot(f"{m.name}: CDF of {len(m.samples)} samples", f"{m.name} ({m.unit})", "fraction (0-1)",
                    lines=[line], y_range=(0.0, 1.0), width=360, height=160)  # fmt: skip
    return svg.render(plot)

"""Measurements in pytest's reports: the `record_measurement` and `power_meter` fixtures.

`record_measurement(name, value, unit, samples=...)` in a test
- adds a JUnit XML property `NAME [UNIT]` = value to the test case (`--junitxml`), for CI systems;
- with pytest-html (`--html`), adds a table of the test's measurements and, for those given raw
  `samples`, a small inline-SVG CDF plot to the test's row in the HTML report.

`record_measurement(name, reading)` also takes an energy reading of `power_meter` (its energy in mJ).

`--metrics FILE` writes every recorded measurement as OpenMetrics text when the session ends (bench.ci's
`hilbench_figure` family, labelled with the test's device and kind, the test's id as `session` and `run_kind`
"pytest"), for node-exporter's textfile collector or a push gateway; an xdist worker writes FILE's name with its
id before the suffix (metrics.gw0.prom), one file per worker in the same folder.

`power_meter`: the test device's power meter (its fleet `energy` table), its blocks taken on the bench clock:
`power_meter.start()` / `stop()`, `with power_meter.measure() as reading:` (energy of the block: `reading.mj`,
`.seconds`, `.mean_mw`), `power_meter.samples`; the test is skipped when the device has no meter.

Loaded by `bench.pytest_plugin` (its `pytest_plugins`); or on its own with `-p bench.testkit.measure_fixtures`.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np
import pytest

from bench.ci.facts import CiReport, Figure, figure_clock
from bench.ci.files import CiFiles
from bench.ci.write import write_ci_files
from bench.config.fleet import Device
from bench.energy.meters import meter_for
from bench.energy.protocol import FIRST_SAMPLE_S, Meter, PowerSample
from bench.measure.energy import Integrator
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
FIGURES = pytest.StashKey[list[Figure]]()  # the session's measurements, for --metrics
RecordMeasurement = Callable[..., None]


@pytest.fixture
def record_measurement(
    request: pytest.FixtureRequest, record_property: Callable[[str, object], None]
) -> RecordMeasurement:
    """`record_measurement(name, value, unit, samples=None)`: keep a measurement in the JUnit XML and HTML reports."""
    recorded = request.node.stash.setdefault(MEASUREMENTS, [])
    figures = request.config.stash.setdefault(FIGURES, [])
    device = next((v for v in request.node.funcargs.values() if isinstance(v, Device)), None)

    def record(name: str, value: float | EnergyReading, unit: str = "", samples: Sequence[float] | None = None) -> None:
        if isinstance(value, EnergyReading):  # energy of a `power_meter.measure()` block
            value, unit = value.mj, unit or "mJ"
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
        figures.append(Figure(device.name if device else "", device.kind if device else "", request.node.nodeid, name,
                              figure_clock(name, {}), unit, float(value), "pytest"))  # fmt: skip
        record_property(f"{name} [{unit}]", value)

    return record


@dataclass
class EnergyReading:
    """Energy of one `power_meter.measure()` block (filled in when the block ends)."""

    mj: float = math.nan
    seconds: float = 0.0
    mean_mw: float = math.nan
    samples: list[PowerSample] = field(default_factory=list)


class PowerMeter:
    """The test device's meter, driven from the device's event loop thread."""

    def __init__(self, meter: Meter, run: Callable[..., object]) -> None:
        self.meter = meter
        self._run = run  # runs a coroutine on the device's loop and waits for it
        self.running = False

    @property
    def samples(self) -> list[PowerSample]:
        """Every sample taken so far (mean power over the `dt_ns` before `t_ns`, bench clock)."""
        return list(self.meter.samples)

    def start(self) -> None:
        """Begin sampling in the background; returns once the first sample is in."""
        if not self.running:
            self._run(self.meter.start())
            self.running = True
            self._run(self.meter.first_sample())

    def stop(self) -> list[PowerSample]:
        """Stop sampling; every sample taken."""
        if self.running:
            self.running = False
            self._run(self.meter.stop())
        return self.samples

    def energy_mj(self, start_ns: int, end_ns: int) -> float:
        """Energy between two bench times (`time.monotonic_ns()`), from the samples so far."""
        return Integrator(self.meter.samples).energy_mj(self.meter.at(start_ns), self.meter.at(end_ns))

    @contextlib.contextmanager
    def measure(self, settle_s: float | None = None) -> Iterator[EnergyReading]:
        """Energy of the block: sampling runs through it (started if needed) and one meter period after it. A meter
        on the device's clock (a PMIC, a device's hwmon file, a console's supply meter) has the block's ends moved onto
        that clock (Meter.at), and its length is the device's."""
        reading = EnergyReading()
        self.start()
        began = time.monotonic_ns()
        yield reading
        ended = time.monotonic_ns()
        time.sleep(settle_s if settle_s is not None else 2 * self.meter.period_s + 0.1)  # the last samples arrive
        deadline = time.monotonic() + FIRST_SAMPLE_S + 3 * self.meter.period_s  # a slow guest's reading comes late
        while not self.meter.arrived_after(ended) and not self.meter.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        start, end = self.meter.at(began), self.meter.at(ended)  # on the samples' timeline (a device's clock)
        whole = Integrator(self.meter.samples)
        if not whole.covers(start, end):
            raise AssertionError(f"device {self.meter.device!r}: the meter's samples do not cover the block "
                                 f"({self.meter.name}; errors: {'; '.join(self.meter.errors) or 'none'})")  # fmt: skip
        reading.mj = whole.energy_mj(start, end)
        reading.seconds = (end - start) / 1e9
        reading.mean_mw = reading.mj / reading.seconds if reading.seconds else math.nan
        reading.samples = [s for s in self.meter.samples if start <= s.t_ns <= end + s.dt_ns]


@pytest.fixture
def power_meter(agent) -> Iterator[PowerMeter]:
    """The test device's power meter (skips the test when its fleet entry has no `energy` table)."""
    meter = meter_for(agent.device, driver=agent.driver)  # a console's supply meter is read through its driver
    if meter is None:
        pytest.skip(f"device {agent.name}: no power meter (no energy table in the fleet file)")
    handle = PowerMeter(meter, lambda coro: agent.loop.run(coro, timeout_s=60))
    try:
        yield handle
    finally:
        handle.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    """--metrics FILE."""
    parser.getgroup("hilbench").addoption(
        "--metrics", metavar="FILE", default=None,
        help="write every record_measurement as OpenMetrics text (node-exporter textfile collector, push gateway)",
    )  # fmt: skip


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write --metrics FILE (per xdist worker: FILE's name with the worker's id)."""
    path = session.config.getoption("--metrics")
    if not path:
        return
    path = Path(path)
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker is None and session.config.pluginmanager.hasplugin("dsession"):
        return  # the xdist controller: its workers measured and write their own files
    if worker is not None:
        path = path.with_name(f"{path.stem}.{worker}{path.suffix}")
    figures = session.config.stash.get(FIGURES, [])
    report = CiReport(job="pytest", title="hilbench pytest", exit_code=int(exitstatus), headline="", figures=figures)
    write_ci_files(report, CiFiles(metrics=path))


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

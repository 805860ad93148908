"""pytest plugin: `pytest --fleet FILE` runs device tests against the fleet's devices.

- Options: `--fleet PATH` (default: $HILBENCH_FLEET, else ./fleet.toml, else the bundled virtual fleet, as
  `hilbench`), `--device NAME` (repeatable), `--kind KIND` (repeatable), `--lease-wait S`, `--output-dir DIR`
  (per-test device logs in its pytest/ folder; the old `--hil-log-dir DIR` still names that log folder).
- `@pytest.mark.kinds("esp32c6", "pi5")` on a test that uses the `device` fixture runs it once per
  matching fleet device, with the device name in the test id; no match -> skipped with a reason.
- Fixtures: `fleet` (the loaded Fleet), `device` (the selected Device, leased for the session, virtual
  devices started on first use), `device_log_dir` (a folder per test and device), `bench_loop` (run
  async bench code from a sync test), `record_measurement(name, value, unit, samples=None)` (from
  `bench.testkit.measure_fixtures`: JUnit XML properties and pytest-html tables and plots).
- `agent` / `console` / `devices` (ready devices, their consoles, crash reports): `bench.testkit.device_fixtures`.
- Failure classes (an infrastructure failure is an ERROR naming the class) and `--quarantine FILE` (known-flaky
  tests run and are reported, do not fail the session, with their pass/fail history): `bench.testkit.classes`.
- The nightly's open alerts of the tested devices (`--results PATH`): `bench.testkit.alerts_fixtures`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from pathlib import Path

import pytest

from bench.config.fleet import FLEET_ENV, LOCAL_FLEET, Device, Fleet, find_fleet, load_fleet
from bench.core.errors import BenchError
from bench.core.leases import LeaseSet
from bench.core.loop_thread import LoopThread
from bench.core.outcomes import class_of
from bench.core.paths import OUTPUT_DIR
from bench.lab.acquire import lab_devices
from bench.lab.doctor import require_pyserial
from bench.provision.controls import BoardControls
from bench.virtual import VirtualDevice, attach, board_controls, detach, has_virtual, make_virtual, with_meter

# record_measurement; agent, console, devices; failure classes and --quarantine; the devices' open alerts; under
# pytest-xdist, each device's tests on one worker
pytest_plugins = (
    "bench.testkit.measure_fixtures",
    "bench.testkit.device_fixtures",
    "bench.testkit.classes",
    "bench.testkit.alerts_fixtures",
    *(("bench.testkit.scheduling",) if importlib.util.find_spec("xdist") else ()),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the bench's command-line options."""
    group = parser.getgroup("hilbench", "npc-hil-bench devices")
    fleet_help = f"fleet file (default: ${FLEET_ENV}, else ./{LOCAL_FLEET}, else the bundled virtual fleet)"
    group.addoption("--fleet", metavar="PATH", default=None, help=fleet_help)
    group.addoption("--device", action="append", default=[], metavar="NAME", help="only this device (repeatable)")
    group.addoption("--kind", action="append", default=[], metavar="KIND", help="only devices of this kind")
    group.addoption("--lease-wait", type=float, default=60.0, metavar="S", help="wait this long for a busy device")
    output_help = f"where reports and logs go; per-test device logs in its pytest/ (default: {OUTPUT_DIR})"
    group.addoption("--output-dir", default=str(OUTPUT_DIR), metavar="DIR", help=output_help)
    group.addoption("--hil-log-dir", default=None, metavar="DIR", help="deprecated: use --output-dir")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the `kinds` marker and check the device options."""
    config.addinivalue_line("markers", "kinds(*names): run the test once per fleet device of these kinds")
    if config.getoption("--hil-log-dir"):
        config.issue_config_time_warning(
            pytest.PytestDeprecationWarning("--hil-log-dir is deprecated: use --output-dir"), 2
        )
    if config.getoption("--fleet") or config.getoption("--device") or config.getoption("--kind"):
        selected_devices(config)  # bad options fail fast, as a usage error


def pytest_report_header(config: pytest.Config) -> str:
    """Which fleet file the device tests run on, and why that one."""
    path, origin = find_fleet(config.getoption("--fleet"))
    return f"hilbench fleet: {path} ({'the bundled virtual fleet' if origin == 'bundled' else origin})"


def selected_devices(config: pytest.Config) -> list[Device]:
    """The fleet devices that --device and --kind select (a bad option is a pytest usage error)."""
    try:
        return _fleet(config).select(config.getoption("--device"), config.getoption("--kind"))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None


def _fleet(config: pytest.Config) -> Fleet:
    cached = getattr(config, "_hilbench_fleet", None)
    if cached is None:
        try:
            require_pyserial()
            cached = load_fleet(find_fleet(config.getoption("--fleet"))[0])
        except BenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        config._hilbench_fleet = cached
    return cached


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `device` over the fleet devices that match the test's `kinds` marker and the options."""
    if "device" not in metafunc.fixturenames:
        return
    defs = metafunc._arg2fixturedefs.get("device")
    if not defs or defs[-1].func.__module__ != __name__:
        return  # a test suite's own `device` fixture: not ours to parametrize
    config = metafunc.config
    fleet = _fleet(config)
    devices = selected_devices(config)
    marker = metafunc.definition.get_closest_marker("kinds")
    wanted = tuple(marker.args) if marker else ()
    if wanted:
        devices = [d for d in devices if d.kind in wanted]
    if devices:
        metafunc.parametrize("device", [d.name for d in devices], ids=[d.name for d in devices], indirect=True)
        return
    what = f"of kind {', '.join(wanted)}" if wanted else "selected"
    reason = f"no device {what} in fleet {fleet.path}"
    metafunc.parametrize(
        "device", [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-device")], indirect=True
    )


class _DevicePool:
    """Session-wide: leases and started virtual devices, released at the end of the session."""

    def __init__(self, lease_wait_s: float) -> None:
        self.loop = LoopThread()
        self.leases = LeaseSet(holder="pytest")
        self.lease_wait_s = lease_wait_s
        self.resolved: dict[str, Device] = {}
        # started stand-ins by device name, each with the device it serves (plugged in and gated: bench.virtual.attach)
        self.stand_ins: dict[str, tuple[Device, VirtualDevice]] = {}
        self.places: list[contextlib.AbstractAsyncContextManager] = []  # held labgrid places

    def get(self, device: Device) -> Device:
        if device.name not in self.resolved:
            if device.lab is None:  # a lab device is locked by its labgrid place (bench.commands.held_devices)
                self.leases.acquire(device.name, wait_s=self.lease_wait_s)
            if device.lab is not None:  # acquired for the session, released in close()
                held = lab_devices([device])
                device = self.loop.run(held.__aenter__(), timeout_s=device.lab.acquire_timeout_s + 30).devices[0]
                self.places.append(held)
            elif device.virtual and has_virtual(device.kind):
                stand_in = make_virtual(device)
                link = self.loop.run(stand_in.start())
                self.stand_ins[device.name] = (device, stand_in)
                attach(device, stand_in)
                device = with_meter(device.with_link(link), stand_in)
            self.resolved[device.name] = device
        return self.resolved[device.name]

    def controls(self, name: str) -> BoardControls | None:
        """The power/storage controls of device `name`'s virtual stand-in (None: a real board's come from the
        fleet file), for writing its OS as `hilbench flash --os` does."""
        return board_controls({n: stand_in for n, (_, stand_in) in self.stand_ins.items()}).get(name)

    def close(self) -> None:
        for device, stand_in in self.stand_ins.values():
            with contextlib.suppress(Exception):  # a stand-in is stopped even when its hub file would not go
                detach(device)
            with contextlib.suppress(Exception):
                self.loop.run(stand_in.stop(), timeout_s=30)
        for held in self.places:
            with contextlib.suppress(Exception):
                self.loop.run(held.__aexit__(None, None, None), timeout_s=30)
        self.leases.release_all()
        self.loop.close()


@pytest.fixture(scope="session")
def fleet(pytestconfig: pytest.Config) -> Fleet:
    """The fleet named by --fleet (default: $HILBENCH_FLEET, else ./fleet.toml, else the bundled virtual fleet)."""
    return _fleet(pytestconfig)


@pytest.fixture(scope="session")
def _hilbench_pool(pytestconfig: pytest.Config):
    pool = _DevicePool(pytestconfig.getoption("--lease-wait"))
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def bench_loop(_hilbench_pool: _DevicePool) -> LoopThread:
    """The session's asyncio loop: `bench_loop.run(coro)` runs bench library code from a test."""
    return _hilbench_pool.loop


@pytest.fixture
def device(request: pytest.FixtureRequest, fleet: Fleet, _hilbench_pool: _DevicePool) -> Device:
    """The device this test instance runs on, leased for the session and reachable through its link."""
    try:
        return _hilbench_pool.get(fleet.get(request.param))
    except BenchError as exc:  # a lease not obtained, a stand-in that did not start: the bench's side
        pytest.fail(f"{class_of(exc)}: device {request.param}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def hil_log_root(pytestconfig: pytest.Config) -> Path:
    """Where the device logs of a test session go: --output-dir's pytest/ folder (or the deprecated --hil-log-dir)."""
    logs = pytestconfig.getoption("--hil-log-dir")
    return Path(logs) if logs else Path(pytestconfig.getoption("--output-dir")) / "pytest"


@pytest.fixture
def device_log_dir(request: pytest.FixtureRequest, hil_log_root: Path) -> Path:
    """A fresh log folder for this test (and device, which is part of the test id)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
    path = hil_log_root / safe
    path.mkdir(parents=True, exist_ok=True)
    return path

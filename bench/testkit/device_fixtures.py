"""pytest fixtures that hand a test a ready device: `agent`, `console`, `devices`; crash reports on failure.

- `agent`: the test's device (parametrized like `device`, `@pytest.mark.kinds(...)` applies) brought up to
  date once per session (flashed/deployed only when out of date; a board with a `[device.os]` table gets its
  OS image written first when its fingerprint is unreadable or differs, as `hilbench flash --os` does; each
  stage is a line in pytest's log and the first test's console), its agent running and a session open:
  `agent.hello()`, `infer(x)`, `load_model(path)`, `update(model, delta=)`, `replay(file, speed=)`, `stats()`.
  The agent stays up for the session; before each test it must answer a hello, else it is recovered (the
  `hil_recovery_ladder` fixture: restart the agent, then redeploy); after a failed test it is restarted anyway.
  A device that cannot be recovered fails that test's setup with one line naming it and the cause; its later
  tests are skipped with that line.
- `console`: the agent's device console (`bench.testkit.console.DeviceConsole`): `expect(pattern, timeout,
  not_matching=)`, `expect_exact(text)`; it starts at the test's start and is saved to the test's log folder.
- `@pytest.mark.devices(2, kind="esp32c6")` + the `devices` fixture: a tuple of ready agents.
- A failing test that used a device gets the device's crash (a traceback mapped to the deployed sources, or
  the last console lines) in its report: terminal, JUnit XML property `crash DEVICE`, pytest-html extras.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path

import pytest

from bench.bundles.trust import run_signing_key
from bench.config.fleet import Device, Fleet
from bench.core.errors import BenchError
from bench.testkit.agent import DeviceAgent
from bench.testkit.console import DeviceConsole
from bench.testkit.crash import decode_crash
from bench.testkit.ota import TestOta
from bench.testkit.recovery import LADDER, DeviceBroken, RecoveryStep, recover, without_device

BRING_UP_TIMEOUT_S = 900.0  # a first flash of a board plus a QEMU boot on a loaded host
USED = pytest.StashKey[list[tuple[DeviceAgent, int]]]()  # the test's agents and their console start index


def pytest_configure(config: pytest.Config) -> None:
    """Declare the `devices` marker."""
    config.addinivalue_line("markers", "devices(n, kind=None): the `devices` fixture holds n ready agents")


class AgentPool:
    """Session-wide: one DeviceAgent per device, the devices found broken, the shared OTA and results."""

    def __init__(self, devices_pool, fleet: Fleet, log_root: Path) -> None:
        self.devices_pool = devices_pool  # bench.pytest_plugin's pool: leases, virtual devices, lab places
        self.loop = devices_pool.loop
        self.log_root = log_root
        hosts = [d.settings.ota_server_host for d in fleet]
        self.ota = TestOta(services_dir(log_root), hosts, run_signing_key(list(fleet)))
        self.agents: dict[str, DeviceAgent] = {}
        self.broken: dict[str, str] = {}  # device name -> the one line that says why
        self.notes: dict[str, list[str]] = {}  # device name -> what getting it ready took, for the next test's console

    def ready(self, device: Device, ladder: Sequence[RecoveryStep]) -> DeviceAgent:
        """The device's agent, answering; pytest.fail (first time) or pytest.skip (later) when it cannot be."""
        if device.name in self.broken:
            pytest.skip(f"{self.broken[device.name]} [found broken by an earlier test]")
        broken = ""
        try:
            agent = self.agents.get(device.name)
            if agent is None:
                resolved = self.devices_pool.get(device)
                log_dir = self.log_root / "_session" / device.name
                controls = self.devices_pool.controls(device.name)
                agent = DeviceAgent(resolved, self.loop, log_dir, self.ota, controls)
                self.agents[device.name] = agent
            notes = self.loop.run(_prepare(agent, ladder), timeout_s=BRING_UP_TIMEOUT_S)
        except DeviceBroken as exc:
            broken = str(exc)
        except (BenchError, TimeoutError) as exc:
            broken = f"device {device.name}: " + (
                f"not ready within {BRING_UP_TIMEOUT_S:g} s"
                if isinstance(exc, TimeoutError)
                else without_device(exc, device.name)
            )
        if broken:
            self.broken[device.name] = broken
            pytest.fail(broken, pytrace=False)
        self.notes[device.name] = notes  # shown on the test's console (`_used`)
        return agent

    def close(self) -> None:
        """Stop every agent cleanly, save each device's whole console, stop the update server."""
        for agent in self.agents.values():
            with contextlib.suppress(Exception):
                self.loop.run(agent.close(), timeout_s=120)
            agent.console.save(agent.log_dir / f"{agent.name}.console.log", start=0)
        with contextlib.suppress(Exception):
            self.loop.run(self.ota.close(), timeout_s=30)


def services_dir(log_root: Path) -> Path:
    """Where the session's model store and results store go: `_session/`, or `_session/xdist-gwN/` on a
    pytest-xdist worker (each worker serves the devices it holds)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return log_root / "_session" / f"xdist-{worker}" if worker else log_root / "_session"


async def _prepare(agent: DeviceAgent, ladder: Sequence[RecoveryStep]) -> list[str]:
    """Bring the agent up, or check it answers and recover it if not; notes for the console."""
    if agent.session is None:
        try:
            await agent.bring_up()
            return [*agent.deploy_log, f"ready: {', '.join(agent.deploy_steps)}"]
        except BenchError as exc:
            cause = without_device(exc, agent.name)
    elif agent.suspect:
        cause = "a test failed on it"  # hello may still work while the test left it in a bad state: start afresh
    else:
        try:
            await agent.stop_frames()
            await agent.check()
            agent.session.drain_faults()  # an earlier test's faults are not this test's
            note = await agent.ensure_model()
            return [note] if note else []
        except BenchError as exc:
            cause = f"agent did not answer: {without_device(exc, agent.name)}"
    step = await recover(agent, cause, ladder)
    agent.suspect = False
    note = await agent.ensure_model()  # a restarted agent resumes the model it last switched to
    return [f"recovered by '{step}' ({cause})", *([note] if note else [])]


@pytest.fixture(scope="session")
def hil_recovery_ladder() -> Sequence[RecoveryStep]:
    """The steps that bring back a device a test broke (override this fixture for a fuller ladder)."""
    return LADDER


@pytest.fixture(scope="session")
def _hilbench_agents(fleet: Fleet, _hilbench_pool, hil_log_root: Path) -> Iterator[AgentPool]:
    pool = AgentPool(_hilbench_pool, fleet, hil_log_root)
    yield pool
    pool.close()


@contextlib.contextmanager
def _used(
    request: pytest.FixtureRequest, pool: AgentPool, agents: Sequence[DeviceAgent], log_dir: Path
) -> Iterator[None]:
    """For the test: consoles start now; afterwards a frame loop left running is stopped and each console
    (this test's lines) is saved to the test's log folder."""
    used = []
    for agent in agents:
        used.append((agent, agent.console.begin()))
        for note in pool.notes.pop(agent.name, []):
            agent.console.feed(f"[bench] {note}", "bench")
    request.node.stash[USED] = used
    yield
    for agent, start in used:
        if agent.session is not None:
            with contextlib.suppress(Exception):
                agent.loop.run(agent.stop_frames(), timeout_s=60)
        agent.console.save(log_dir / f"{agent.name}.console.log", start)


@pytest.fixture
def agent(
    request: pytest.FixtureRequest,
    device: Device,
    device_log_dir: Path,
    _hilbench_agents: AgentPool,
    hil_recovery_ladder: Sequence[RecoveryStep],
) -> Iterator[DeviceAgent]:
    """The test's device, up to date, its agent answering (see the module docstring)."""
    ready = _hilbench_agents.ready(device, hil_recovery_ladder)
    with _used(request, _hilbench_agents, [ready], device_log_dir):
        yield ready


@pytest.fixture
def console(agent: DeviceAgent) -> DeviceConsole:
    """The console of the test's device, from the test's start."""
    return agent.console


@pytest.fixture
def devices(
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
    fleet: Fleet,
    device_log_dir: Path,
    _hilbench_agents: AgentPool,
    hil_recovery_ladder: Sequence[RecoveryStep],
) -> Iterator[tuple[DeviceAgent, ...]]:
    """`@pytest.mark.devices(n, kind=None)`: n ready agents (healthy devices first; skipped when too few)."""
    marker = request.node.get_closest_marker("devices")
    count = int(marker.args[0]) if marker and marker.args else 2
    kind = marker.kwargs.get("kind") if marker else None
    try:
        candidates = fleet.select(pytestconfig.getoption("--device"), pytestconfig.getoption("--kind"))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    candidates = [d for d in candidates if kind is None or d.kind == kind]
    healthy = [d for d in candidates if d.name not in _hilbench_agents.broken]
    what = f" of kind {kind}" if kind else ""
    if len(healthy) < count:
        broken = [_hilbench_agents.broken[d.name] for d in candidates if d.name in _hilbench_agents.broken]
        pytest.skip(
            f"needs {count} devices{what}; fleet {fleet.path} has {len(healthy)} usable"
            + (f" ({'; '.join(broken)})" if broken else "")
        )
    chosen = tuple(_hilbench_agents.ready(d, hil_recovery_ladder) for d in healthy[:count])
    with _used(request, _hilbench_agents, chosen, device_log_dir):
        yield chosen


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A failed test that used devices: attach each device's crash (or last console lines) to its report."""
    outcome = yield
    report = outcome.get_result()
    used = item.stash.get(USED, [])
    if not report.failed or report.when != "call" or not used:
        return
    for agent, _start in used:
        agent.suspect = True
    html = item.config.pluginmanager.getplugin("html") is not None
    for agent, start in used:
        why = "" if agent.session is not None and not agent.session.closed else "the agent's link ended"
        sources = agent.driver.agent_sources() if agent.driver is not None else {}
        crash = decode_crash(agent.name, agent.console.text(start), sources, why)
        if crash is None:
            continue
        text = crash.text()
        report.sections.append((f"device {agent.name} crash", text))
        item.user_properties.append((f"crash {agent.name}", text))
        if html:
            from pytest_html import extras

            block = f"<pre class='hilbench-crash'>{escape(text)}</pre>"
            report.extras = [*getattr(report, "extras", []), extras.html(block)]

"""A device ready for a test: brought up to date (flashed/deployed only when out of date), its agent running, a
session open and its console followed. Sync methods for tests; the work runs on the bench's event loop thread.

One `DeviceAgent` per device lives for the whole pytest session (a suite does not reflash or restart per test);
`bench.pytest_plugin` checks it before each test and recovers it (`bench.testkit.recovery`) when a test broke it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.agent.endpoint import AgentEndpoint
from bench.agent.session import AgentSession
from bench.bundles.fingerprint import device_clock
from bench.config.fleet import Device
from bench.config.kinds import Settings
from bench.core.errors import BenchError, ConfigError
from bench.core.loop_thread import LoopThread
from bench.devices import has_driver
from bench.devices.base import Driver
from bench.models import kind_model
from bench.nightly.flashing import make_driver
from bench.nightly.ota_stage import is_fault_model
from bench.ota.rollout import DeviceUpdate, channel_url, update_device
from bench.ota.timing import timing_named
from bench.provision.controls import BoardControls
from bench.testkit.console import DeviceConsole
from bench.testkit.ota import TestOta

log = logging.getLogger(__name__)
HEALTH_TIMEOUT_S = 5.0  # a hello must come back this fast (kinds with slower agents get their driver's timeout)


@dataclass(frozen=True)
class Replayed:
    """One device's measurements from `DeviceAgent.replay`."""

    status: str  # ok, failed or unreachable
    detail: str
    values: dict[str, float | None]  # measurement name -> value (bench.measure.device names)
    units: dict[str, str]
    run_id: int


class DeviceAgent:
    """A device's agent session for tests: `hello()`, `infer(x)`, `load_model(path)`, `update(model)`,
    `replay(session)`, `stats()`; `console` is the device's console."""

    def __init__(
        self, device: Device, loop: LoopThread, log_dir: Path, ota: TestOta, controls: BoardControls | None = None
    ) -> None:
        self.device = device
        self.controls = controls  # a virtual board's power/storage for writing its OS (None: the fleet file's)
        self.loop = loop
        self.log_dir = log_dir
        self.ota = ota
        self.console = DeviceConsole(device.name)
        self.driver: Driver | None = None
        self.session: AgentSession | None = None
        self.deployed = False
        self.suspect = False  # a test failed on it: start the agent afresh before the next test
        self.replayed = False  # this agent process has had a session replayed into it
        self.deploy_steps: list[str] = []  # what the last deploy did, per step ("firmware: up to date", ...)
        self.deploy_log: list[str] = []  # the last deploy's progress, a line per stage ("flash: os: booting", ...)
        self._follower: asyncio.Task[None] | None = None
        self._own_manifest: dict[str, Any] | None = None  # the device's own model, published for switching back

    @property
    def name(self) -> str:
        """The device's name in the fleet."""
        return self.device.name

    @property
    def kind(self) -> str:
        """The device's kind."""
        return self.device.kind

    @property
    def settings(self) -> Settings:
        """The device's typed settings (its kind's defaults and the fleet file's values)."""
        return self.device.settings

    @property
    def info(self) -> dict[str, Any]:
        """The agent's last hello."""
        return self.session.info if self.session else {}

    def __repr__(self) -> str:
        return f"<DeviceAgent {self.name} ({self.kind})>"

    # -- for tests (sync) --------------------------------------------------------------------------

    @property
    def clock(self) -> str:
        """The clock its figures are on, as the device reports it (bench.bundles.fingerprint.device_clock): "icount"
        for an emulator whose guest time is virtual (bench-clock latencies measure the emulation), else
        "realtime" or "real time"."""
        return device_clock(self.device, self.hello())

    def hello(self) -> dict[str, Any]:
        """The agent's hello: agent, version, platform, runtime, model, caps."""
        return self._run(self._session().hello())

    def infer(self, x: list[float]) -> dict[str, Any]:
        """Run the current model once on feature vector `x`: {y, act, p, us, model}."""
        return self._run(self._session().infer([float(v) for v in x]))

    def stats(self) -> dict[str, Any]:
        """Memory in use and peak, frame and inference counts, error counters."""
        return self._run(self._session().stats())

    def update(
        self, model: str | Path | dict[str, Any], *, delta: bool = False, allow_downgrade: bool = False
    ) -> DeviceUpdate:
        """Update the agent over its update channel (`update_channel`: CoAP, WebSocket or gRPC) through the
        bench's update server, as the nightly's update stage does, and check the result through its hello.
        `model`: a model file (signed with the fleet's key, published as the next version), a manifest already
        published in `ota.store`, or a name from `ota.manifest(...)` ("v1", "v2", "forged-v2", "crash", ...).
        `allow_downgrade`: the agent may take an older model (the fault models, named `npc-fault-...`, always
        go with it). Never raises for a device-side failure: see the returned record's `ok`, `detail`,
        `kept_previous`."""
        manifest = self.ota.resolve(model, self.device)
        allow = allow_downgrade or is_fault_model(manifest)
        return self._run(self._update(manifest, delta, allow), timeout_s=900)

    def load_model(self, path: str | Path) -> DeviceUpdate:
        """Switch the agent to the model file `path` (signed with the fleet's signing key, sent over its update
        channel), whatever its line and version: the test chose it; BenchError if the agent refused it or did not
        switch."""
        result = self.update(Path(path), allow_downgrade=True)
        if not result.ok:
            raise BenchError(f"device {self.name}: model {path} not loaded: {result.detail}")
        return result

    def replay(self, session_file: str | Path, *, speed: float | None = 1.0) -> Replayed:
        """Play a recorded session into this agent at `speed` (None: as fast as the link takes it); the
        measurements (decision latency, FPS, jitter, misses, faults), also stored in the test run's results.
        Input `seq` numbers only grow within one agent process (docs/protocol.md), so a second replay restarts
        the agent first, as a replay through `hilbench replay` starts from a fresh one."""
        return self._run(self._replay(Path(session_file), speed), timeout_s=1800)

    def next_fault(self, timeout: float = 15.0) -> dict[str, Any]:
        """The next `fault` message the agent sends during this test (DeviceUnreachable when none comes)."""
        return self._run(self._session().next_fault(timeout))

    def run(self, coro_fn, timeout_s: float | None = 600):
        """Run `await coro_fn(session)` on the bench loop, for anything the sync methods do not cover."""
        return self._run(coro_fn(self._session()), timeout_s=timeout_s)

    # -- lifecycle (async, on the bench loop) ------------------------------------------------------

    async def bring_up(self) -> None:
        """Deploy once per session (the driver skips what is up to date), start the agent, open a session."""
        if not has_driver(self.kind):
            raise ConfigError(f"device {self.name}: no driver for kind {self.kind!r}")
        if not self.deployed:
            await self.deploy()
        await self.open()

    async def deploy(self) -> None:
        """Flash/deploy through the driver: only what is out of date is written. A board with a `[device.os]`
        table gets its OS image written first when its fingerprint is unreadable or differs, as the nightly's
        flash stage does."""
        await self.close()
        driver = self._driver()
        self.deploy_log = []
        steps = await driver.flash(self._progress)
        with contextlib.suppress(Exception):
            await driver.close_agent()
        self.deploy_steps = [f"{s.step}: {'up to date' if s.skipped else s.detail}" for s in steps]
        failed = next((s for s in steps if not s.ok), None)
        if failed is not None:
            raise BenchError(f"device {self.name}: {failed.step} failed: {failed.detail}")
        self.deployed = True

    async def open(self) -> None:
        """Start the agent (if needed), open a session, follow the console."""
        if self.session is not None and not self.session.closed:
            return
        driver = self._driver()
        self._follower = asyncio.create_task(self._follow(driver), name=f"console-{self.name}")
        try:
            transport = await driver.open_agent()
            self.session = await AgentSession.open(
                transport,
                device=self.name,
                log_path=self.log_dir / f"{self.name}.agent.log",
                timeout=driver.reply_timeout_s,
                hello_timeout=max(15.0, driver.reply_timeout_s),
            )
        except BaseException:
            await self.close()
            raise
        self.session.console_listeners.append(lambda text: self.console.feed(text, "agent"))
        self.console.ended = None
        self.replayed = False

    async def check(self) -> None:
        """Raise a BenchError when the agent does not answer a hello in time."""
        session = self._session()
        timeout = max(HEALTH_TIMEOUT_S, self.driver.reply_timeout_s if self.driver else 0)
        await session.hello(timeout=timeout)

    async def ensure_model(self) -> str | None:
        """Switch back to the device's own model (its kind's or fleet file's `model`) when a test left another
        one running; a note saying so, or None when nothing was needed."""
        path, _fmt = kind_model(self.kind, self.settings)
        running = (await self._session().hello()).get("model") or {}
        if running.get("sha256") == hashlib.sha256(path.read_bytes()).hexdigest():
            return None
        if self._own_manifest is None:
            self._own_manifest = self.ota.resolve(path, self.device)
        result = await self._update(self._own_manifest, delta=False, allow_downgrade=True)  # back, maybe older
        if not result.ok:
            raise BenchError(f"device {self.name}: could not switch back to {path.name}: {result.detail}")
        return f"switched back to {path.name} (a test left v{running.get('version')} running)"

    async def restart(self) -> None:
        """Stop the agent (and its session) and start it again."""
        await self.close()
        await self.open()

    async def redeploy(self) -> None:
        """Deploy again (what is out of date) and start the agent."""
        self.deployed = False
        await self.deploy()
        await self.open()

    async def stop_frames(self) -> None:
        """Stop a frame loop a test left running (no error when none runs)."""
        if self.session is not None and not self.session.closed:
            with contextlib.suppress(BenchError):
                await self.session.stop(timeout=HEALTH_TIMEOUT_S)

    async def close(self) -> None:
        """Close the session and stop the agent cleanly through the driver (Ctrl-C, shutdown, poweroff)."""
        session, self.session = self.session, None
        if session is not None:
            await session.close()
        if self.driver is not None:
            with contextlib.suppress(Exception):
                await self.driver.close_agent()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._follower
            self._follower = None
        self.console.ended = "the agent was closed"

    # -- internals ---------------------------------------------------------------------------------

    def _run(self, coro, timeout_s: float | None = 600):
        return self.loop.run(coro, timeout_s=timeout_s)

    def _session(self) -> AgentSession:
        if self.session is None:
            raise BenchError(f"device {self.name}: the agent is not open")
        return self.session

    def _driver(self) -> Driver:
        if self.driver is None:  # as the nightly's flash stage makes it: the OS written where out of date
            self.log_dir.mkdir(parents=True, exist_ok=True)  # the driver's log (bmaptool's output, ...) goes here
            self.driver = make_driver(self.device, self.log_dir, None, os=True, controls=self.controls)
        return self.driver

    def _progress(self, _done: int, _total: int, what: str) -> None:
        """A flash/deploy progress report: a log line (pytest's log) each time the stage changes."""
        line = f"flash: {what}"
        if not self.deploy_log or self.deploy_log[-1] != line:
            self.deploy_log.append(line)
            log.info("device %s: %s", self.name, line)

    async def _follow(self, driver: Driver) -> None:
        with contextlib.suppress(BenchError, OSError):
            await driver.follow_console(lambda text: self.console.feed(text, "device"))

    async def _update(self, manifest: dict[str, Any], delta: bool, allow_downgrade: bool) -> DeviceUpdate:
        base_url = channel_url(self.device, self.driver, await self.ota.ports(self.device))
        timing = timing_named(self.settings.ota_timing)
        return await update_device(
            self._session(),
            self.ota.store,
            manifest,
            base_url,
            timing=timing,
            want_delta=delta,
            allow_downgrade=allow_downgrade,
        )

    async def _replay(self, session_file: Path, speed: float | None) -> Replayed:
        from bench.replay.service import replay_fleet  # the replayer and its store: only when a test replays

        if self.replayed:
            await self.restart()
        self.replayed = True
        session = self._session()

        async def opened(_device: Device) -> AgentEndpoint:
            async def keep_open() -> None:
                return None

            return AgentEndpoint(session, keep_open, self.driver)  # a console's supply meter follows its driver

        result = await replay_fleet([self.device], session_file, self.ota.results(), opened, speed=speed)
        run = result.devices[0]
        measured = run.result.measurements if run.result else []
        return Replayed(
            run.status,
            run.detail,
            {m.name: m.value for m in measured},
            {m.name: m.unit for m in measured},
            result.run_id,
        )

"""Open a Linux board's agent for a replay run, with board telemetry sampled in the background and
written to the results store (with the bench-side faults: agent exits, SSH drops) when the run closes it.
The session is a SurvivingSession: an agent that dies mid-run is restarted and the run carries on. With held
drivers (the nightly's, bench.devices.held) a fresh agent is started, and it stays up when the run closes it.

    opener = LinuxAgentOpener(store, run_id)
    await ReplayRun(plan, devices, opener.open, store, run_id).execute()
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.agent.endpoint import AgentEndpoint
from bench.config.fleet import Device
from bench.devices.held import HeldDrivers, driver_of
from bench.devices.linux import AgentFault, LinuxDriver
from bench.measure.faults import FaultEvent
from bench.recovery.surviving import SurvivingSession
from bench.store.results import ResultStore
from bench.store.telemetry import add_telemetry
from bench.telemetry.monitor import Sample


def bench_fault(fault: AgentFault) -> FaultEvent:
    """A fault the bench saw (not one the agent reported), as the results store keeps faults."""
    return FaultEvent(
        kind=fault.kind,
        cause="bench",
        model_version=None,
        prev_version=None,
        t_switch_us=None,
        t_fault_us=None,
        t_fault_bench_ns=fault.t_ns,
        since_switch_ms=None,
        rollback_us=None,
        detail=fault.detail,
    )


@dataclass
class LinuxAgentOpener:
    """`open(device)` for `ReplayRun`: agent session + telemetry monitor; `close()` stores what was sampled."""

    store: ResultStore
    run_id: int
    telemetry: bool = True
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    drivers: dict[str, LinuxDriver] = field(default_factory=dict)  # the open ones, by device name
    held: HeldDrivers | None = None  # drivers kept across runs: each run starts a fresh agent that outlives it

    async def open(self, device: Device) -> AgentEndpoint:
        """Start (if needed) and open the device's agent; begin sampling its telemetry."""
        driver = await driver_of(device, self.held, fresh=True)
        assert isinstance(driver, LinuxDriver), f"{device.name}: a Linux board's opener got {type(driver).__name__}"
        self.drivers[device.name] = driver
        faults_before = len(driver.faults)  # a held driver's earlier runs' faults are stored with those runs
        try:
            session = await SurvivingSession.open(device, driver, store=self.store, run_id=self.run_id)
            monitor = await driver.telemetry() if self.telemetry else None
        except BaseException:
            await driver.close()
            raise
        if monitor is not None:
            await monitor.start()

        async def close() -> None:
            try:
                if monitor is not None:
                    samples = await monitor.stop()
                    self.samples[device.name] = samples
                    self.errors[device.name] = list(monitor.errors)
                    add_telemetry(self.store, self.run_id, device.name, samples)
                if driver.faults[faults_before:]:
                    faults = [bench_fault(f) for f in driver.faults[faults_before:]]
                    self.store.measures.add_faults(self.run_id, device.name, faults)
                self.store.runs.update_device(
                    self.run_id,
                    device.name,
                    telemetry_errors=self.errors.get(device.name, []),
                    agent_restarts=session.restarts,
                    dropped_inputs=session.dropped_inputs,
                    recoveries=[r.to_json() for r in session.recoveries],
                )
            finally:
                await session.close()
                await driver.release_agent()

        return AgentEndpoint(session, close)

"""The nightly's over-the-air stages: a model update on every device, then the fault suite (bad artefacts
pushed through the same update path; each must be refused or rolled back with the running model kept).

Models come from a store made for the run from the fixture models: version 1 is the bundled model (so a
delta can be taken from it), version 2 its successor. The fault fixtures never enter it: the fault suite
publishes them in a store of its own, deleted when the suite ends, each under a name of its own (`npc-fault-crash`,
...), which every agent refuses (kind `version`: not the device's line) unless the update says `allow_downgrade`,
as only the fault suite's do. A fault model rolled back is deleted by the agent, so the devices end the stage
running the model they ran, with no fault file on them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.agent.session import AgentSession
from bench.bundles.trust import run_signing_key
from bench.config.fleet import Device
from bench.core.errors import BenchError
from bench.core.outcomes import Outcome, class_of
from bench.core.paths import MODELS_DIR
from bench.devices.base import Driver
from bench.devices.held import HeldDrivers, driver_of
from bench.measure.faults import fault_event
from bench.models import fleet_formats
from bench.models.signing import generate_key, load_private_key, sign_manifest
from bench.nightly.stages import DeviceOutcome
from bench.ota import channels
from bench.ota.rollout import DeviceUpdate, bind_address, channel_url, update_device
from bench.ota.store import ModelStore
from bench.ota.timing import timing_named
from bench.report.ota_results import ota_record
from bench.store.results import ResultStore

FAMILY = "npc-policy"
FAULT_FAMILY = "npc-fault"  # the fault models' names: npc-fault-<case>, never a device's line
FAULT_WAIT_S = 15.0  # a rollback comes within the 3 s probation; slow links and emulation get some slack


@dataclass(frozen=True)
class FaultCase:
    """One bad artefact and the fault kinds that count as the agent handling it."""

    name: str
    fixture: str | None  # fixtures/models/<fixture>.<ext>; None: the good v2 with a forged signature
    expect: frozenset[str]


FAULT_CASES = (
    FaultCase("forged-signature", None, frozenset({"signature"})),
    FaultCase("crash", "npc-fault-crash-int8", frozenset({"rollback", "crash"})),
    FaultCase(
        "out-of-memory",
        {"tflite-int8": "npc-fault-arena-int8", "npcm-int8": "npc-fault-oversize-int8"},
        frozenset({"oom", "rollback"}),
    ),
    FaultCase("broken-weights", "npc-fault-broken-int8", frozenset({"parse", "oom"})),
)


Manifests = dict[tuple[str, str], dict[str, Any]]


@functools.cache
def build_store(root: Path, key_path: Path) -> tuple[ModelStore, Manifests]:
    """A store with v1 (bundled) and v2 of the policy in every format; returns it and the manifest of each
    (format, case): "v1", "v2", "forged-v1", "forged-v2". Built once per `root`: the update stage and the fault
    suite of a run share it. Models are signed with `key_path`."""
    store = ModelStore(root)
    key = load_private_key(key_path)
    manifests: Manifests = {}
    other_key = generate_key()
    for fmt, ext in fleet_formats().items():
        manifests[fmt, "v1"] = store.publish(MODELS_DIR / f"{FAMILY}-int8.{ext}", key, name=FAMILY, fmt=fmt).manifest
        manifests[fmt, "v2"] = store.publish(MODELS_DIR / f"{FAMILY}-int8-v2.{ext}", key, name=FAMILY, fmt=fmt).manifest
        for version in ("v1", "v2"):  # a good model signed by another key; sent as the one the device lacks
            forged = {k: v for k, v in manifests[fmt, version].items() if k != "sig"}
            manifests[fmt, f"forged-{version}"] = sign_manifest(forged, other_key)
    return store, manifests


def fault_store(root: Path, key_path: Path) -> tuple[ModelStore, Manifests]:
    """The fault suite's own store at `root`, with the fault models (`publish_faults`); returns it and the
    manifest of each (format, case name)."""
    store = ModelStore(root)
    return store, publish_faults(store, key_path)


def publish_faults(store: ModelStore, key_path: Path) -> Manifests:
    """Publish each fault fixture in every format into `store`, named `npc-fault-<case>` (a name no device runs,
    so an agent takes it only with `allow_downgrade`), signed with `key_path`; the manifest of each (format, case
    name)."""
    key = load_private_key(key_path)
    manifests: Manifests = {}
    for fmt, ext in fleet_formats().items():
        for case in FAULT_CASES:
            fixture = case.fixture.get(fmt) if isinstance(case.fixture, dict) else case.fixture
            if fixture is not None and (MODELS_DIR / f"{fixture}.{ext}").is_file():
                name = f"{FAULT_FAMILY}-{case.name}"
                manifests[fmt, case.name] = store.publish(
                    MODELS_DIR / f"{fixture}.{ext}", key, name=name, fmt=fmt
                ).manifest
    return manifests


def is_fault_model(manifest: dict[str, Any]) -> bool:
    """Whether `manifest` is one of the fault models (`publish_faults`)."""
    return str(manifest.get("name", "")).startswith(FAULT_FAMILY + "-")


class _Agent:
    """A device's driver and agent session, opened for one stage (on the device's held driver, whose agent stays
    up afterwards, when `drivers` holds them)."""

    def __init__(self, device: Device, log_dir: Path, drivers: HeldDrivers | None = None) -> None:
        self.device = device
        self.log_dir = log_dir
        self.drivers = drivers
        self.driver: Driver  # set on entry
        self.session: AgentSession | None = None

    async def __aenter__(self) -> _Agent:
        self.driver = await driver_of(self.device, self.drivers, self.log_dir)
        try:
            transport = await self.driver.open_agent()
            log = self.log_dir / f"{self.device.name}.ota-agent.log"
            self.session = await AgentSession.open(
                transport, device=self.device.name, log_path=log, timeout=self.driver.reply_timeout_s
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await self.driver.close_agent()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            if self.session is not None:
                await self.session.close()
        with contextlib.suppress(Exception):
            await self.driver.release_agent()

    def base_url(self, ports: dict[str, int]) -> str:
        return channel_url(self.device, self.driver, ports)


async def _served(
    devices: list[Device], log_dir: Path, store: ModelStore, work, drivers: HeldDrivers | None
) -> dict[str, DeviceOutcome]:
    """Serve `store` on the devices' update channels and run `work(agent, ports)` on every device at once (on
    their held drivers when `drivers` is given)."""
    hosts = [d.settings.ota_server_host for d in devices]
    wanted = {channels.channel_of(d) for d in devices}
    async with channels.serve(store, wanted, bind_address(hosts)) as ports:

        async def one(device: Device) -> tuple[str, DeviceOutcome]:
            try:
                async with _Agent(device, log_dir, drivers) as agent:
                    return device.name, await work(agent, ports)
            except BenchError as exc:
                detail = f"cannot reach the agent: {exc}"
                return device.name, DeviceOutcome(False, detail, outcome=Outcome(class_of(exc), detail))

        return dict(await asyncio.gather(*(one(d) for d in devices)))


def _format(device: Device) -> str:
    return device.settings.model_format


async def update_stage(
    devices: list[Device],
    log_dir: Path,
    results: ResultStore,
    run_id: int | None,
    drivers: HeldDrivers | None = None,
) -> dict[str, DeviceOutcome]:
    """Update every device to the policy's version 2 (a delta where the agent can patch), kept with the run. A device
    that runs another line of models gets it with `allow_downgrade` (agents refuse another line without it)."""
    store, manifests = build_store(log_dir / "ota-store", run_signing_key(devices))

    async def work(agent: _Agent, ports: dict[str, int]) -> DeviceOutcome:
        manifest = manifests.get((_format(agent.device), "v2"))
        if manifest is None:
            return DeviceOutcome(True, f"no {_format(agent.device)} model to update to", skipped=True)
        timing = timing_named(agent.device.settings.ota_timing)
        running = (agent.session.info.get("model") or {}).get("name")
        update = await update_device(  # a device on another line (orin-1's npc-policy-large) is moved to it on purpose
            agent.session, store, manifest, agent.base_url(ports), timing=timing, want_delta=True,
            allow_downgrade=running is not None and running != manifest["name"],
        )  # fmt: skip
        if run_id is not None:
            results.runs.update_device(run_id, agent.device.name, ota=[ota_record(update)])
        return DeviceOutcome(update.ok, _update_text(update), data=update.to_json(), outcome=update.outcome)

    return await _served(devices, log_dir, store, work, drivers)


def _update_text(u: DeviceUpdate) -> str:
    if not u.ok:
        return u.detail + (" (previous model kept)" if u.kept_previous else " (model state unknown!)")
    mode = "delta" if u.delta else "full"
    return (
        f"{u.target} {mode} over {u.channel}: {u.bytes} B in {u.blocks} blocks, {u.transfer_ms:.0f} ms, "
        f"switch {u.switch_ms:.1f} ms"
    )


async def fault_suite(
    devices: list[Device],
    log_dir: Path,
    results: ResultStore,
    run_id: int | None,
    drivers: HeldDrivers | None = None,
) -> dict[str, DeviceOutcome]:
    """Push each bad artefact (from the suite's own store, deleted afterwards; module docstring); a case passes
    when the agent reports an expected fault and still runs the model it ran before. Faults are kept with the
    run."""
    key_path = run_signing_key(devices)
    _, manifests = build_store(log_dir / "ota-store", key_path)
    root = log_dir / "fault-store"
    shutil.rmtree(root, ignore_errors=True)  # a suite killed before its cleanup left one
    try:
        store, faults = fault_store(root, key_path)
        work = functools.partial(_fault_cases, store, manifests, faults, results, run_id)
        return await _served(devices, log_dir, store, work, drivers)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _fault_cases(
    store: ModelStore,
    manifests: Manifests,
    faults: Manifests,
    results: ResultStore,
    run_id: int | None,
    agent: _Agent,
    ports: dict[str, int],
) -> DeviceOutcome:
    """The fault cases on one device (see `fault_suite`): the fault models go with `allow_downgrade`, as their
    names are not the device's line; the forged one without, as a real update would."""
    session = agent.session
    timing = timing_named(agent.device.settings.ota_timing)
    cases: dict[str, dict[str, Any]] = {}
    events = []
    fmt = _format(agent.device)
    for case in FAULT_CASES:
        before = (await session.hello()).get("model")
        if case.fixture is None:
            running_v2 = (before or {}).get("sha256") == manifests[fmt, "v2"]["sha256"]
            manifest = manifests.get((fmt, "forged-v1" if running_v2 else "forged-v2"))
        else:
            manifest = faults.get((fmt, case.name))
        if manifest is None:
            continue
        update = await update_device(
            session, store, manifest, agent.base_url(ports), timing=timing, allow_downgrade=case.fixture is not None
        )
        try:
            fault = await session.next_fault(timeout=FAULT_WAIT_S)
        except BenchError:
            fault = None
        after = (await session.hello()).get("model")
        kept = (before or {}).get("sha256") == (after or {}).get("sha256")
        if fault is not None:
            events.append(fault_event(fault))
        handled = fault is not None and fault.get("kind") in case.expect and kept
        cases[case.name] = {
            "ok": handled,
            "fault": None if fault is None else {k: fault.get(k) for k in ("kind", "cause", "rollback_us", "detail")},
            "kept_model": kept,
            "update_detail": update.detail,
        }
    if run_id is not None and events:
        results.measures.add_faults(run_id, agent.device.name, events)
    failed = [n for n, c in cases.items() if not c["ok"]]
    detail = (
        f"{len(cases)} fault case(s) handled, running model kept"
        if not failed
        else "not handled: " + ", ".join(f"{n} ({_why(cases[n])})" for n in failed)
    )
    return DeviceOutcome(not failed, detail, data={"cases": cases})


def _why(case: dict[str, Any]) -> str:
    if not case["kept_model"]:
        return "running model lost"
    if case["fault"] is None:
        return "no fault reported"
    return f"fault {case['fault']['kind']} not expected"

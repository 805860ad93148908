"""Orchestration of the nightly run. Each stage runs on the devices still in the run; a device that fails
a stage is recorded and left out of the later ones, and the run goes on with the others."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.alerts.night import NightAlerts
from bench.bundles.artefacts import ArtefactStore, keep_deployed
from bench.bundles.fingerprint import configured_model_sha256, device_fingerprint
from bench.config.fleet import Device, Fleet
from bench.core.errors import BenchError, ConfigError, ExitCode
from bench.core.outcomes import PASS, PRODUCT_CLASSES, FailureClass, Outcome, infrastructure, product, worst
from bench.core.outcomes import exit_code as outcome_exit_code
from bench.core.paths import ROOT
from bench.devices.held import HeldDrivers
from bench.devices.probe import probe_link
from bench.lab.acquire import lab_devices
from bench.lab.doctor import device_problems
from bench.measure.host import HostNoiseMeter, wait_until_quiet
from bench.nightly.alerting import night_findings, record_alerts
from bench.nightly.attribution import attribute, regressions_of
from bench.nightly.confirm import Confirmation, confirm_run
from bench.nightly.flashing import DeviceFlash, ProgressFactory, flash_devices
from bench.nightly.ota_stage import fault_suite, update_stage
from bench.nightly.publish import OTA_SESSION, PublishedRun, publish_runs
from bench.nightly.stages import DeviceOutcome, StageResult
from bench.nightly.timing import NightTime, SessionTime
from bench.provision.controls import BoardControls
from bench.recovery.records import HealthSummary, bad_devices, summary
from bench.replay.agents import deploy, fleet_opener
from bench.replay.run import DEFAULT_WAVES, DeviceRun
from bench.replay.service import ReplayResult, replay_fleet
from bench.report.html import write_health
from bench.results.thresholds import Thresholds, load_thresholds
from bench.results.verdict import INCONCLUSIVE, NOT_REPRODUCED, REGRESSION
from bench.store.health import PASSED_ON_RETRY
from bench.store.results import ResultStore
from bench.store.retention import PruneResult, prune
from bench.store.runs import UPDATE_RUN_KIND
from bench.virtual import board_controls, virtual_fleet

CONFIRM_STATES = (REGRESSION, NOT_REPRODUCED)
CONFIRM_QUIET_WAIT_S = 180.0  # a confirm replay waits at most this long for the host to quiet, then runs anyway
STAGE_NAMES = ("check", "flash", "replay", "confirm", "update", "faults")


@dataclass
class NightlyOptions:
    """What to run the nightly on, and where its output goes."""

    fleet: Fleet
    devices: list[Device]
    sessions: list[Path]
    store: ResultStore
    reports_dir: Path
    baseline: str | None = None  # a pinned baseline name (default: the window of recent accepted runs)
    speed: float | None = 1.0
    skip: frozenset[str] = frozenset()
    thresholds: Thresholds | None = None
    fail_acknowledged: bool | None = None  # acknowledged alerts fail the night (None: the thresholds' [alerts])
    waves: str = DEFAULT_WAVES  # how a replay groups devices into waves (bench.replay.run.waves)


@dataclass
class NightlyResult:
    """Everything the nightly did, for the summary and the exit code."""

    started: str
    log_dir: Path
    stages: list[StageResult] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # device -> the stage that dropped it, and why
    runs: list[PublishedRun] = field(default_factory=list)
    replay_run_ids: dict[str, int] = field(default_factory=dict)  # session id -> run id
    skipped: dict[str, str] = field(default_factory=dict)  # device -> why health left it out (marked bad)
    health: list[HealthSummary] = field(default_factory=list)  # every selected device's state and MTBF
    health_page: Path | None = None  # reports/health.html
    session_files: dict[str, Path] = field(default_factory=dict)  # session id -> file
    ota_run_id: int | None = None  # the run of the update and fault stages
    confirmations: dict[str, Confirmation] = field(default_factory=dict)  # session id -> final verdicts
    retries: dict[str, int] = field(default_factory=dict)  # session id -> the run that retried infrastructure failures
    retention: PruneResult | None = None  # the raw rows pruned after the night (bench.store.retention)
    alerts: NightAlerts | None = None  # the night's alerts, new and known (bench.alerts)
    time: NightTime = field(default_factory=NightTime)  # where the night's time went (bench.nightly.timing)

    def outcomes(self) -> dict[str, Outcome]:
        """Each device's failure class over the whole nightly (bench.core.outcomes): the worst of its stages' and
        of its final verdicts (a confirmed regression, an inconclusive one)."""
        per: dict[str, list[Outcome]] = {}
        for stage in self.stages:
            for name, o in stage.devices.items():
                per.setdefault(name, []).append(stage_outcome(stage.name, o))
        for conf in self.confirmations.values():
            for v in conf.verdicts:
                if v.status == REGRESSION:
                    per.setdefault(v.device, []).append(Outcome(FailureClass.REGRESSION, f"{v.title}: {v.reason}"))
                elif v.status == INCONCLUSIVE:
                    per.setdefault(v.device, []).append(Outcome(FailureClass.INCONCLUSIVE, f"{v.title}: {v.reason}"))
        return {name: worst(found) for name, found in per.items()}

    @property
    def exit_code(self) -> ExitCode:
        """3 when no device was reachable (or all are marked bad); 1 when a stage failed as a whole, or on an
        alert that fails the night (untriaged, or acknowledged when the rules say so: bench.alerts; without
        alerts, on any regression or product failure); else 3 when only infrastructure failed, else 0 (also for a
        device that passed on retry)."""
        if self.skipped and not self.stages:
            return ExitCode.UNREACHABLE
        check = next((s for s in self.stages if s.name == "check"), None)
        if check is not None and check.devices and not any(o.ok for o in check.devices.values()):
            return ExitCode.UNREACHABLE
        if any(s.error for s in self.stages):
            return ExitCode.FAILED
        if self.alerts is not None:  # every regression and product failure has its alert: triaged ones pass
            if self.alerts.failing:
                return ExitCode.FAILED
            return outcome_exit_code(o for o in self.outcomes().values() if o.cls not in PRODUCT_CLASSES)
        if any(r.regressions for r in self.runs):
            return ExitCode.FAILED
        return outcome_exit_code(self.outcomes().values())

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "started": self.started,
            "exit_code": int(self.exit_code),
            "logs": str(self.log_dir),
            "stages": [s.to_json() for s in self.stages],
            "dropped": self.dropped,
            "skipped": self.skipped,
            "health": [h.to_json() for h in self.health],
            "outcomes": {name: o.to_json() for name, o in sorted(self.outcomes().items())},
            "retries": self.retries,
            "causes": {s: c.causes for s, c in self.confirmations.items() if c.causes},
            "health_page": str(self.health_page) if self.health_page else None,
            "runs": [r.to_json() for r in self.runs if r.session != OTA_SESSION],
            "ota_run": next((r.to_json() for r in self.runs if r.session == OTA_SESSION), None),
            "retention": self.retention.to_json() if self.retention else None,
            "alerts": self.alerts.to_json() if self.alerts else None,
            "time": self.time.to_json(),
        }


INFRA_STAGES = ("check", "flash")  # a device that fails these failed on the bench's side


def stage_outcome(stage: str, outcome: DeviceOutcome) -> Outcome:
    """A stage's device outcome as a failure class: its own when the stage set one; else a pass when it worked,
    an infrastructure failure in the link check and flashing, a product failure in the other stages."""
    if outcome.outcome is not None:
        return outcome.outcome
    if outcome.ok:
        return PASS
    reason = f"{stage}: {outcome.detail}"
    return infrastructure(reason) if stage in INFRA_STAGES else product(reason)


class NightlyProgress:
    """How the nightly shows what it does (the CLI gives rich output; tests give nothing)."""

    def stage(self, name: str, devices: list[Device]) -> None:
        """A stage starts on `devices`."""

    def done(self, result: StageResult) -> None:
        """A stage ended."""

    def flash_bars(self) -> ProgressFactory:
        """Per-device progress callbacks for flashing."""
        return lambda device: lambda done, total, what: None


def git_rev() -> str | None:
    """The bench checkout's commit, when it is a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


async def run_nightly(opts: NightlyOptions, progress: NightlyProgress | None = None) -> NightlyResult:
    """Run every stage not in `opts.skip`, store and publish; never raises for a device-side failure."""
    show = progress or NightlyProgress()
    night_started = time.monotonic()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    result = NightlyResult(started=stamp, log_dir=opts.reports_dir / f"nightly-{stamp}")
    result.log_dir.mkdir(parents=True, exist_ok=True)
    agents = HeldDrivers(result.log_dir)  # the stages after the flash share the agents (bench.devices.held)
    stages: list[tuple[str, Callable[[list[Device]], Awaitable[dict[str, DeviceOutcome]]]]] = [
        ("check", _check),
        ("flash", lambda devs: _flash(devs, result.log_dir, show, board_controls(running))),
        ("replay", lambda devs: _replay(devs, opts, result, agents)),
        ("confirm", lambda devs: _confirm(devs, opts, result, agents)),
        ("update", lambda devs: update_stage(devs, result.log_dir, opts.store, _ota_run(devs, opts, result), agents)),
        ("faults", lambda devs: fault_suite(devs, result.log_dir, opts.store, _ota_run(devs, opts, result), agents)),
    ]
    bad = bad_devices(opts.store, [d.name for d in opts.devices])
    for name, state in bad.items():
        result.skipped[name] = f"marked bad since {state.since}: {state.reason} (`hilbench fleet health --fix`)"
    wanted = [d for d in opts.devices if d.name not in bad]
    async with lab_devices(wanted) as held, virtual_fleet(held.devices) as (devices, running):
        try:
            for name, stage in stages:
                if name in opts.skip or not devices:
                    continue
                show.stage(name, devices)
                started = time.monotonic()
                try:
                    devices = await held.relink(devices)  # places stay held; a restarted exporter's new port is used
                    outcomes = await stage(devices)
                    stage_result = StageResult(name, time.monotonic() - started, outcomes)
                except BenchError as exc:
                    stage_result = StageResult(name, time.monotonic() - started, {}, error=str(exc))
                result.stages.append(stage_result)
                result.time.stages[name] = stage_result.seconds
                show.done(stage_result)
                for dev_name, outcome in stage_result.devices.items():
                    if not outcome.ok:
                        result.dropped.setdefault(dev_name, f"{name}: {outcome.detail}")
                devices = [d for d in devices if d.name not in result.dropped]
        finally:  # before the fleet's teardown, also when interrupted: no agent is left running on a board
            await agents.close()
    if "confirm" in opts.skip or not any(s.name == "confirm" for s in result.stages):
        for session, run_id in result.replay_run_ids.items():  # judged without a replay
            result.confirmations.setdefault(
                session, await confirm_run(opts.store, run_id, "", [], _thresholds(opts), None, pinned=_pinned(opts))
            )
    if result.ota_run_id is not None:
        ota_ok = all(s.ok for s in result.stages if s.name in ("update", "faults"))
        opts.store.runs.finish_run(result.ota_run_id, "ok" if ota_ok else "failed")
    result.alerts = _alerts(opts, result)  # before the pages, which show them
    result.runs = publish_runs(
        opts.store, result.replay_run_ids, opts.reports_dir, result.confirmations, result.ota_run_id
    )
    result.health = [summary(opts.store, d.name) for d in opts.devices]
    result.health_page = write_health(
        opts.reports_dir, result.started, [h.to_json() for h in result.health], result.skipped
    )
    result.retention = prune(opts.store, opts.fleet.retention)  # last: tonight's reports are written
    result.time.total_s = time.monotonic() - night_started
    return result


def _alerts(opts: NightlyOptions, result: NightlyResult) -> NightAlerts:
    """Record the night's confirmed regressions, drifts and product failures as alerts (bench.alerts)."""
    rules = _thresholds(opts).alerts
    if opts.fail_acknowledged is not None:
        rules = replace(rules, fail_acknowledged=opts.fail_acknowledged)
    ota = {s.name: {d: stage_outcome(s.name, o) for d, o in s.devices.items()}
           for s in result.stages if s.name in ("update", "faults")}  # fmt: skip
    findings = night_findings(opts.store, result.confirmations, result.replay_run_ids, result.ota_run_id, ota)
    return record_alerts(opts.store, findings, rules)


def _thresholds(opts: NightlyOptions) -> Thresholds:
    if opts.thresholds is None:
        opts.thresholds = load_thresholds()
    return opts.thresholds


def _pinned(opts: NightlyOptions) -> int | None:
    """The run a named baseline pins the windows to, or None (rolling window)."""
    if not opts.baseline:
        return None
    named = opts.store.windows.named(opts.baseline)
    if named is None:
        raise ConfigError(f"--baseline {opts.baseline}: no such baseline", hint="see `hilbench baseline list`")
    return named.run_id


def _ota_run(devices: list[Device], opts: NightlyOptions, result: NightlyResult) -> int:
    """The run that model updates and fault cases are kept with: one of its own (kind "ota"), so a session's
    time plots stay on the session's time axis instead of stretching over the faults that came after it."""
    if result.ota_run_id is None:
        result.ota_run_id = opts.store.runs.begin_run(
            UPDATE_RUN_KIND, bench=opts.fleet.bench.name, session=OTA_SESSION, git_rev=git_rev()
        )
    known = {d.name for d in opts.store.runs.devices(result.ota_run_id)}
    for device in devices:
        if device.name not in known:
            opts.store.runs.add_device(result.ota_run_id, device.name, device.kind)
            opts.store.runs.update_device(result.ota_run_id, device.name, status="ok")
    return result.ota_run_id


async def _check(devices: list[Device]) -> dict[str, DeviceOutcome]:
    """Each device's link is probed, and the host has the programs it needs (`hilbench doctor`'s check)."""
    probes = await asyncio.gather(*(probe_link(d) for d in devices))
    outcomes = {}
    for device, probe in zip(devices, probes, strict=True):
        missing = await asyncio.to_thread(device_problems, device)
        if missing:
            detail = "; ".join(f"{f.detail} (fix: {f.fix})" for f in missing)
            outcomes[device.name] = DeviceOutcome(
                False, detail, data={"missing": [f.check for f in missing]}, outcome=infrastructure(detail)
            )
        else:
            outcomes[device.name] = DeviceOutcome(
                probe.reachable, probe.detail, outcome=None if probe.reachable else infrastructure(probe.detail)
            )
    return outcomes


async def _flash(
    devices: list[Device], log_dir: Path, show: NightlyProgress, boards: dict[str, BoardControls]
) -> dict[str, DeviceOutcome]:
    flashed = await flash_devices(devices, log_dir, show.flash_bars(), os=True, boards=boards)
    return {
        f.name: DeviceOutcome(
            f.ok,
            f.reason or ("up to date" if f.up_to_date else "; ".join(f"{s.step}: {s.detail}" for s in f.steps)),
            skipped=f.up_to_date,
            data={"seconds": round(f.seconds, 2), "attempts": f.attempts, **_os_fingerprint(f)},
            outcome=f.outcome,
        )
        for f in flashed
    }


def _flashed_os(result: NightlyResult) -> dict[str, Any]:
    """Device -> OS fingerprint, from this nightly's flash stage."""
    flash = next((s for s in result.stages if s.name == "flash"), None)
    return {n: o.data["os"] for n, o in flash.devices.items() if "os" in o.data} if flash else {}


def _os_fingerprint(flashed: DeviceFlash) -> dict[str, object]:
    """A Linux board's OS fingerprint after the flash stage (its `os` step), to keep with the run."""
    step = next((s for s in flashed.steps if s.step == "os"), None)
    return {"os": step.figures["fingerprint"]} if step is not None and "fingerprint" in step.figures else {}


async def _replay(
    devices: list[Device], opts: NightlyOptions, result: NightlyResult, agents: HeldDrivers
) -> dict[str, DeviceOutcome]:
    """Replay every session into the devices still in the run, on the night's held drivers (`agents`). A device
    whose replay failed on the bench's side (link lost, board hung, also when the ladder brought it back) is
    replayed once more on its own; one that then passes stays in the run, "passed on retry", with the retry's
    figures."""
    outcomes: dict[str, DeviceOutcome] = {}
    for path in opts.sessions:
        live = [d for d in devices if outcomes.get(d.name, DeviceOutcome(True)).ok]
        if not live:
            break
        replay = await replay_session(live, path, opts, result, "replay", agents)
        result.replay_run_ids[replay.session_id] = replay.run_id
        result.session_files[replay.session_id] = path
        classes = {run.device.name: _replay_outcome(opts.store, replay.run_id, run) for run in replay.devices}
        runs_of = {d.name: replay.run_id for d in live}
        again = [d for d in live if classes[d.name].cls == FailureClass.INFRASTRUCTURE]
        again = [d for d in again if d.name not in bad_devices(opts.store, [d.name])]  # the ladder gave up on it
        if again:
            retry = await replay_session(again, path, opts, result, "retry", agents)
            result.retries[replay.session_id] = retry.run_id
            for run in retry.devices:
                name = run.device.name
                first, second = classes[name], _replay_outcome(opts.store, retry.run_id, run)
                classes[name] = second.retried(first) if second.cls == FailureClass.PASS else second
                runs_of[name] = retry.run_id
                opts.store.runs.update_device(retry.run_id, name, outcome=classes[name].to_json())
                opts.store.runs.update_device(
                    replay.run_id, name, retry={"run_id": retry.run_id, "outcome": classes[name].to_json()}
                )
                if classes[name].passed_on_retry:
                    opts.store.health.record_event(name, PASSED_ON_RETRY, run_id=retry.run_id, detail=first.label)
        for d in live:
            prev = outcomes.get(d.name)
            runs = [*(prev.data.get("runs", []) if prev else []), runs_of[d.name]]
            outcome = classes[d.name]
            ok = outcome.cls == FailureClass.PASS
            detail = f"{replay.session_id}: {outcome.label}" if not ok else f"{len(runs)} session(s)"
            if outcome.passed_on_retry:
                detail += f"; {replay.session_id} {outcome.label}"
            if ok and not outcome.passed_on_retry and prev is not None and prev.outcome is not None:
                outcome = prev.outcome  # an earlier session's "passed on retry" stays on record
            outcomes[d.name] = DeviceOutcome(ok, detail, data={"runs": runs}, outcome=outcome)
    return outcomes


def _replay_outcome(store: ResultStore, run_id: int, run: DeviceRun) -> Outcome:
    """A device's class in a replay run: the run's own (bench.replay.run), or a product failure when it did not
    run its configured model (refused or rolled back)."""
    outcome = run.outcome
    wrong = model_mismatch(store, run_id, run.device) if outcome.cls == FailureClass.PASS else ""
    if wrong:
        wrong += " (device not reset to its model)"
        outcome = product(f"{run.status}: {wrong}")
        store.runs.update_device(run_id, run.device.name, status="failed", detail=wrong, outcome=outcome.to_json())
    return outcome


async def replay_session(
    devices: list[Device], path: Path, opts: NightlyOptions, result: NightlyResult, kind: str, agents: HeldDrivers
) -> ReplayResult:
    """Replay one session into `devices` (on the night's held drivers) and store the run with the bench host's
    noise and each device's fingerprint."""
    replay = await recorded_replay(
        devices, path, opts.store, result.log_dir, speed=opts.speed, bench=opts.fleet.bench.name,
        kind=kind, os_of=_flashed_os(result), waves=opts.waves, drivers=agents,
    )  # fmt: skip
    result.time.sessions.append(SessionTime(replay.session_id, kind, replay.recorded_s, replay.phases))
    return replay


async def recorded_replay(
    devices: list[Device],
    path: Path,
    store: ResultStore,
    log_dir: Path,
    *,
    speed: float | None,
    bench: str,
    kind: str,
    os_of: dict[str, Any] | None = None,
    waves: str = DEFAULT_WAVES,
    drivers: HeldDrivers | None = None,
) -> ReplayResult:
    """Replay `path` into `devices` and store the run with what the verdicts need besides the figures: the bench
    host's noise and each device's fingerprint (`os_of`: Linux boards' OS fingerprints from their flash).
    `drivers`: held drivers whose agents stay up after the run (bench.devices.held)."""
    rev = git_rev()
    artefacts = ArtefactStore.of(store)
    meter = HostNoiseMeter()
    replay = await replay_fleet(
        devices, path, store, make_opener=lambda run_id: fleet_opener(store, run_id, log_dir, drivers=drivers),
        speed=speed, bench=bench, git_rev=rev, kind=kind, waves=waves,
    )  # fmt: skip
    noise = meter.stop()
    store.verdicts.record_host(replay.run_id, noise.to_json())
    infos = {d.name: d.info for d in store.runs.devices(replay.run_id)}
    for device in devices:
        hello = infos.get(device.name, {}).get("agent") or {}
        latency = infos.get(device.name, {}).get("latency_clock", "bench")
        fp = device_fingerprint(
            device, hello, git_rev=rev, host=noise.host, os=(os_of or {}).get(device.name), latency_clock=latency
        )
        store.verdicts.record_fingerprint(replay.run_id, device.name, fp)
        kept = keep_deployed(artefacts, device)  # enough to put the device back to this fingerprint later
        if fp.get("os_image"):
            kept["OS image"] = fp["os_image"]  # an id: the image itself is the fleet's
        store.runs.update_device(replay.run_id, device.name, artefacts=kept)
    return replay


def model_mismatch(store: ResultStore, run_id: int, device: Device) -> str:
    """Why the model the device ran in run `run_id` is not the one `device` configures ("" when it is, or when
    unknown)."""
    want = configured_model_sha256(device)
    got = store.verdicts.fingerprints(run_id).get(device.name, {}).get("model_sha256")
    if want and got and want != got:
        return f"ran model sha256 {got[:12]}…, not the configured {want[:12]}…"
    return ""


async def _attribute(
    done: Confirmation,
    session: str,
    devices: list[Device],
    opts: NightlyOptions,
    result: NightlyResult,
    agents: HeldDrivers,
) -> None:
    """Name the cause of each confirmed regression: the only fingerprint change, or by replays with each changed
    component put back (bench.nightly.attribution); the device gets its configured set back afterwards."""
    path = result.session_files[session]

    async def replay(devs: list[Device]) -> int:
        return (await replay_session(devs, path, opts, result, "attribution", agents)).run_id

    async def put_on(device: Device) -> None:
        await deploy(device, result.log_dir, agents)

    for name, regression in regressions_of(done.verdicts).items():
        device = next((d for d in devices if d.name == name), None)
        if device is None:
            continue
        found = await attribute(opts.store, done.run_id, regression, device, _thresholds(opts), replay, put_on,
                                pinned=_pinned(opts))  # fmt: skip
        if found is None:
            continue
        done.causes[name] = found.text
        opts.store.runs.update_device(done.run_id, name, cause=found.to_json())
        if found.runs:
            await put_on(device)  # back to what the fleet configures, for the stages after this one


async def _confirm(
    devices: list[Device], opts: NightlyOptions, result: NightlyResult, agents: HeldDrivers
) -> dict[str, DeviceOutcome]:
    """Judge every session run; replay each suspected regression (and a control device) before reporting it."""
    outcomes = {d.name: DeviceOutcome(True, "nothing to confirm") for d in devices}

    async def replay(path: str, devs: list[Device]) -> int:
        # a confirm replay on a busy host would give its devices their inputs as the busy night did: it waits for
        # the host to quiet (docs/replay.md, "Inputs on the counted clock")
        await wait_until_quiet(_thresholds(opts).host.busy_others_pct, CONFIRM_QUIET_WAIT_S)
        return (await replay_session(devs, Path(path), opts, result, "confirm", agents)).run_id

    for session, run_id in result.replay_run_ids.items():
        in_run = {x.name: x for x in opts.store.runs.devices(run_id)}
        live = [d for d in devices if d.name in in_run]
        retried = [d for d in live if in_run[d.name].info.get("retry")]
        done = await confirm_run(
            opts.store, run_id, str(result.session_files[session]), live, _thresholds(opts), replay,
            pinned=_pinned(opts), judged=[d.name for d in live if d not in retried],
        )  # fmt: skip
        if retried and session in result.retries:  # judged on the figures of their retry
            again = await confirm_run(
                opts.store, result.retries[session], str(result.session_files[session]), retried,
                _thresholds(opts), replay, pinned=_pinned(opts),
            )  # fmt: skip
            done = done.merged(again)
        result.confirmations[session] = done
        await _attribute(done, session, live, opts, result, agents)
        for d in live:
            mine = [v for v in done.verdicts if v.device == d.name and v.status in CONFIRM_STATES]
            if mine:
                words = ", ".join(f"{v.metric} {v.status}" for v in mine)
                outcomes[d.name] = DeviceOutcome(True, f"{session}: {words}", data={"confirm_run": done.confirm_run})
    return outcomes

"""Orchestration of the nightly run. Each stage runs on the devices still in the run; a device that fails
a stage is recorded and left out of the later ones, and the run goes on with the others."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError, ConfigError, ExitCode
from bench.fingerprint import configured_model_sha256, device_fingerprint
from bench.flashing import DeviceFlash, ProgressFactory, flash_devices
from bench.fleet import Device, Fleet
from bench.health.records import HealthSummary, bad_devices, summary
from bench.lab.acquire import lab_devices
from bench.measure.host import HostNoiseMeter
from bench.nightly.confirm import Confirmation, confirm_run
from bench.nightly.ota_stage import fault_suite, update_stage
from bench.nightly.publish import OTA_SESSION, PublishedRun, publish_runs
from bench.nightly.stages import DeviceOutcome, StageResult
from bench.paths import ROOT
from bench.probe import probe_link
from bench.provision.controls import BoardControls
from bench.replay.agents import fleet_opener
from bench.replay.service import ReplayResult, replay_fleet
from bench.report.html import write_health
from bench.results.baseline import get_baseline
from bench.results.evidence import fingerprints, record_fingerprint, record_host
from bench.results.runview import UPDATE_RUN_KIND
from bench.results.store import ResultStore
from bench.results.thresholds import Thresholds, load_thresholds
from bench.results.verdict import NOT_REPRODUCED, REGRESSION
from bench.virtual import board_controls, virtual_fleet

CONFIRM_STATES = (REGRESSION, NOT_REPRODUCED)
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

    @property
    def exit_code(self) -> ExitCode:
        """3 when no device was reachable (or all are marked bad), 1 on any failure or regression, else 0."""
        if self.skipped and not self.stages:
            return ExitCode.UNREACHABLE
        check = next((s for s in self.stages if s.name == "check"), None)
        if check is not None and check.devices and not any(o.ok for o in check.devices.values()):
            return ExitCode.UNREACHABLE
        if any(not s.ok for s in self.stages) or any(r.regressions for r in self.runs):
            return ExitCode.FAILED
        return ExitCode.OK

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
            "health_page": str(self.health_page) if self.health_page else None,
            "runs": [r.to_json() for r in self.runs if r.session != OTA_SESSION],
            "ota_run": next((r.to_json() for r in self.runs if r.session == OTA_SESSION), None),
        }


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
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    result = NightlyResult(started=stamp, log_dir=opts.reports_dir / f"nightly-{stamp}")
    result.log_dir.mkdir(parents=True, exist_ok=True)
    stages: list[tuple[str, Callable[[list[Device]], Awaitable[dict[str, DeviceOutcome]]]]] = [
        ("check", _check),
        ("flash", lambda devs: _flash(devs, result.log_dir, show, board_controls(running))),
        ("replay", lambda devs: _replay(devs, opts, result)),
        ("confirm", lambda devs: _confirm(devs, opts, result)),
        ("update", lambda devs: update_stage(devs, result.log_dir, opts.store, _ota_run(devs, opts, result))),
        ("faults", lambda devs: fault_suite(devs, result.log_dir, opts.store, _ota_run(devs, opts, result))),
    ]
    bad = bad_devices(opts.store, [d.name for d in opts.devices])
    for name, state in bad.items():
        result.skipped[name] = f"marked bad since {state.since}: {state.reason} (`hilbench fleet health --fix`)"
    wanted = [d for d in opts.devices if d.name not in bad]
    async with lab_devices(wanted) as held, virtual_fleet(held.devices) as (devices, running):
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
            show.done(stage_result)
            for dev_name, outcome in stage_result.devices.items():
                if not outcome.ok:
                    result.dropped.setdefault(dev_name, f"{name}: {outcome.detail}")
            devices = [d for d in devices if d.name not in result.dropped]
    if "confirm" in opts.skip or not any(s.name == "confirm" for s in result.stages):
        for session, run_id in result.replay_run_ids.items():  # judged without a replay
            result.confirmations.setdefault(
                session, await confirm_run(opts.store, run_id, "", [], _thresholds(opts), None, pinned=_pinned(opts))
            )
    if result.ota_run_id is not None:
        ota_ok = all(s.ok for s in result.stages if s.name in ("update", "faults"))
        opts.store.finish_run(result.ota_run_id, "ok" if ota_ok else "failed")
    result.runs = publish_runs(
        opts.store, result.replay_run_ids, opts.reports_dir, result.confirmations, result.ota_run_id
    )
    result.health = [summary(opts.store, d.name) for d in opts.devices]
    result.health_page = write_health(
        opts.reports_dir, result.started, [h.to_json() for h in result.health], result.skipped
    )
    return result


def _thresholds(opts: NightlyOptions) -> Thresholds:
    if opts.thresholds is None:
        opts.thresholds = load_thresholds()
    return opts.thresholds


def _pinned(opts: NightlyOptions) -> int | None:
    """The run a named baseline pins the windows to, or None (rolling window)."""
    if not opts.baseline:
        return None
    named = get_baseline(opts.store, opts.baseline)
    if named is None:
        raise ConfigError(f"--baseline {opts.baseline}: no such baseline", hint="see `hilbench baseline list`")
    return named.run_id


def _ota_run(devices: list[Device], opts: NightlyOptions, result: NightlyResult) -> int:
    """The run that model updates and fault cases are kept with: one of its own (kind "ota"), so a session's
    time plots stay on the session's time axis instead of stretching over the faults that came after it."""
    if result.ota_run_id is None:
        result.ota_run_id = opts.store.begin_run(
            UPDATE_RUN_KIND, bench=str(opts.fleet.bench.get("name", "")), session=OTA_SESSION, git_rev=git_rev()
        )
    known = {d.name for d in opts.store.devices(result.ota_run_id)}
    for device in devices:
        if device.name not in known:
            opts.store.add_device(result.ota_run_id, device.name, device.kind)
            opts.store.update_device(result.ota_run_id, device.name, status="ok")
    return result.ota_run_id


async def _check(devices: list[Device]) -> dict[str, DeviceOutcome]:
    probes = await asyncio.gather(*(probe_link(d) for d in devices))
    return {d.name: DeviceOutcome(p.reachable, p.detail) for d, p in zip(devices, probes, strict=True)}


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


async def _replay(devices: list[Device], opts: NightlyOptions, result: NightlyResult) -> dict[str, DeviceOutcome]:
    outcomes: dict[str, DeviceOutcome] = {}
    for path in opts.sessions:
        live = [d for d in devices if outcomes.get(d.name, DeviceOutcome(True)).ok]
        if not live:
            break
        replay = await replay_session(live, path, opts, result, "replay")
        result.replay_run_ids[replay.session_id] = replay.run_id
        result.session_files[replay.session_id] = path
        for run in replay.devices:
            prev = outcomes.get(run.device.name)
            runs = [*(prev.data.get("runs", []) if prev else []), replay.run_id]
            ok = run.status == "ok"
            detail = f"{replay.session_id}: {run.status}" + (f" ({run.detail})" if run.detail else "")
            wrong = _model_mismatch(opts.store, replay.run_id, run.device)
            if ok and wrong:
                ok, detail = False, f"{replay.session_id}: {wrong}"
                opts.store.update_device(replay.run_id, run.device.name, status="failed", detail=wrong)
            outcomes[run.device.name] = DeviceOutcome(
                ok, detail if not ok else f"{len(runs)} session(s)", data={"runs": runs}
            )
    return outcomes


async def replay_session(
    devices: list[Device], path: Path, opts: NightlyOptions, result: NightlyResult, kind: str
) -> ReplayResult:
    """Replay one session into `devices` and store the run with the bench host's noise and each device's
    fingerprint."""
    rev = git_rev()
    meter = HostNoiseMeter()
    replay = await replay_fleet(
        devices, path, opts.store, make_opener=lambda run_id: fleet_opener(opts.store, run_id, result.log_dir),
        speed=opts.speed, bench=str(opts.fleet.bench.get("name", "")), git_rev=rev, kind=kind,
    )  # fmt: skip
    noise = meter.stop()
    record_host(opts.store, replay.run_id, noise.to_json())
    infos = {d.name: d.info for d in opts.store.devices(replay.run_id)}
    for device in devices:
        hello = infos.get(device.name, {}).get("agent") or {}
        os_fp = _flashed_os(result).get(device.name)  # Linux boards: the OS the flash stage found or wrote
        latency = infos.get(device.name, {}).get("latency_clock", "bench")
        fp = device_fingerprint(device, hello, git_rev=rev, host=noise.host, os=os_fp, latency_clock=latency)
        record_fingerprint(opts.store, replay.run_id, device.name, fp)
    return replay


def _model_mismatch(store: ResultStore, run_id: int, device: Device) -> str:
    """Why the model the device ran is not the configured one ("" when it is, or when unknown)."""
    want = configured_model_sha256(device)
    got = fingerprints(store, run_id).get(device.name, {}).get("model_sha256")
    if want and got and want != got:
        return f"ran model sha256 {got[:12]}…, not the configured {want[:12]}… (device not reset to its model)"
    return ""


async def _confirm(devices: list[Device], opts: NightlyOptions, result: NightlyResult) -> dict[str, DeviceOutcome]:
    """Judge every session run; replay each suspected regression (and a control device) before reporting it."""
    outcomes = {d.name: DeviceOutcome(True, "nothing to confirm") for d in devices}

    async def replay(path: str, devs: list[Device]) -> int:
        return (await replay_session(devs, Path(path), opts, result, "confirm")).run_id

    for session, run_id in result.replay_run_ids.items():
        live = [d for d in devices if d.name in {x.name for x in opts.store.devices(run_id)}]
        done = await confirm_run(
            opts.store, run_id, str(result.session_files[session]), live, _thresholds(opts), replay,
            pinned=_pinned(opts),
        )  # fmt: skip
        result.confirmations[session] = done
        for d in live:
            mine = [v for v in done.verdicts if v.device == d.name and v.status in CONFIRM_STATES]
            if mine:
                words = ", ".join(f"{v.metric} {v.status}" for v in mine)
                outcomes[d.name] = DeviceOutcome(True, f"{session}: {words}", data={"confirm_run": done.confirm_run})
    return outcomes

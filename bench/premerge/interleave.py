"""Running a pre-merge check: deploy the baseline build and the candidate in turn, replay each session on the
chosen devices k times per build (bench.premerge.plan's order), and judge each device's candidate replays against
its baseline replays of the same job with the nightly's rules (bench.results.judge; a majority of the replays
decides, bench.results.majority). A device the product failed on (a candidate it did not run) leaves the check and
is reported as that failure, not judged. The runs are stored with kinds `check` and `check-baseline`, which no nightly
window or drift series takes in (bench.results.evidence), and never join a baseline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bundles import reset_model
from bench.config.fleet import Device
from bench.core.outcomes import PASS, FailureClass, Outcome, infrastructure, product, worst
from bench.core.outcomes import exit_code as outcome_exit_code
from bench.lab.acquire import reachable_devices
from bench.nightly.flashing import flash_devices
from bench.nightly.orchestration import model_mismatch, recorded_replay
from bench.premerge.plan import BASE, CANDIDATE, order
from bench.results.evidence import record_verdicts
from bench.results.judge import judge_run
from bench.results.majority import majority
from bench.results.thresholds import Thresholds
from bench.results.verdict import INCONCLUSIVE, REGRESSION, Verdict, settle
from bench.store.results import ResultStore
from bench.store.windows import CHECK_BASELINE_KIND, CHECK_KIND
from bench.virtual import VirtualDevice, board_controls

KINDS = {BASE: CHECK_BASELINE_KIND, CANDIDATE: CHECK_KIND}
Progress = Callable[[str], None]


@dataclass
class CheckOptions:
    """What to check, where, and how often."""

    devices: list[Device]  # as the fleet configures them: the baseline build
    candidate: Callable[[Device], Device] | None  # the device set to run the candidate (None: the fleet's own build)
    candidate_name: str
    sessions: list[Path]
    store: ResultStore
    work: Path  # logs
    thresholds: Thresholds
    runs: int = 3
    speed: float | None = 1.0
    bench: str = ""


@dataclass
class SessionCheck:
    """One session's replays of both builds and the candidate's final verdicts."""

    session: str
    file: Path
    runs: dict[str, list[int]] = field(default_factory=lambda: {BASE: [], CANDIDATE: []})
    verdicts: list[Verdict] = field(default_factory=list)


@dataclass
class CheckResult:
    """What the check found and where its time went."""

    candidate: str
    runs_per_build: int
    sessions: list[SessionCheck] = field(default_factory=list)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)  # device -> what went wrong beside verdicts
    timings: list[tuple[str, float]] = field(default_factory=list)

    def note(self, device: str, outcome: Outcome) -> None:
        """A device's replay or deploy that did not pass."""
        if outcome.cls != FailureClass.PASS:
            self.outcomes.setdefault(device, []).append(outcome)

    def product_failed(self, device: str) -> bool:
        """Whether the product failed on `device` during the check (a candidate it did not run, a crash)."""
        return any(o.cls == FailureClass.PRODUCT for o in self.outcomes.get(device, []))

    @property
    def verdicts(self) -> list[Verdict]:
        """Every session's final verdicts."""
        return [v for s in self.sessions for v in s.verdicts]

    def device_outcomes(self) -> dict[str, Outcome]:
        """Each device's failure class over the check: its deploys and replays, and its verdicts."""
        per = {d: list(o) for d, o in self.outcomes.items()}
        for v in self.verdicts:
            if v.status == REGRESSION:
                per.setdefault(v.device, []).append(Outcome(FailureClass.REGRESSION, f"{v.title}: {v.reason}"))
            elif v.status == INCONCLUSIVE:
                per.setdefault(v.device, []).append(Outcome(FailureClass.INCONCLUSIVE, f"{v.title}: {v.reason}"))
            else:
                per.setdefault(v.device, []).append(PASS)
        return {d: worst(o) for d, o in per.items()}

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "candidate": self.candidate, "runs_per_build": self.runs_per_build,
            "sessions": [{"session": s.session, "file": str(s.file), "runs": s.runs,
                          "verdicts": [v.to_dict() for v in s.verdicts]} for s in self.sessions],
            "outcomes": {d: o.to_json() for d, o in sorted(self.device_outcomes().items())},
            "timings": [{"step": what, "seconds": round(secs, 2)} for what, secs in self.timings],
        }  # fmt: skip

    @property
    def exit_code(self) -> int:
        """1 on a regression or a candidate the devices did not run, 3 when only the bench failed, else 0."""
        return int(outcome_exit_code(self.device_outcomes().values()))


async def run_check(opts: CheckOptions, progress: Progress | None = None) -> CheckResult:
    """Deploy, replay and judge; a device-side failure is recorded, not raised."""
    show = progress or (lambda message: None)
    result = CheckResult(opts.candidate_name, opts.runs)
    sides = order(opts.runs)
    async with reachable_devices(opts.devices) as (resolved, running):
        builds = {BASE: reset_model(resolved)}
        builds[CANDIDATE] = reset_model([opts.candidate(d) for d in resolved]) if opts.candidate else builds[BASE]
        same = opts.candidate is None
        current: str | None = None
        for path in opts.sessions:
            check = SessionCheck("", path)
            result.sessions.append(check)
            for n, side in enumerate(sides, 1):
                live = [d for d in builds[side] if d.name not in result.outcomes]
                if not live:
                    break
                if current != side and not (same and current is not None):
                    await _deploy(live, side, opts, result, running, show, first=current is None)
                    current = side
                    live = [d for d in live if d.name not in result.outcomes]
                show(f"{path.name}: replay {n} of {len(sides)} ({side})")
                started = time.monotonic()
                done = await recorded_replay(live, path, opts.store, opts.work, speed=opts.speed, bench=opts.bench,
                                             kind=KINDS[side])  # fmt: skip
                result.timings.append((f"replay {n} ({side}, {path.name})", time.monotonic() - started))
                check.session = done.session_id
                check.runs[side].append(done.run_id)
                for run in done.devices:
                    result.note(run.device.name, run.outcome)
                    wrong = model_mismatch(opts.store, done.run_id, run.device) if side == CANDIDATE else ""
                    if wrong:
                        result.note(run.device.name, product(f"did not run the candidate: {wrong}"))
        started = time.monotonic()
        judge_check(opts.store, result, opts.thresholds, [d.name for d in opts.devices])
        result.timings.append(("judging", time.monotonic() - started))
    return result


def judge_check(store: ResultStore, result: CheckResult, thresholds: Thresholds, devices: list[str]) -> None:
    """Each session's verdicts, for the devices whose builds both ran: one the product failed on (a candidate it did
    not run, an agent that crashed) left the check there, and its figures are not the candidate's: it is reported
    as that failure, never judged on metrics."""
    judged = [d for d in devices if not result.product_failed(d)]
    for check in result.sessions:
        check.verdicts = judge_session(store, check, thresholds, judged)


async def _deploy(devices: list[Device], side: str, opts: CheckOptions, result: CheckResult,
                  running: dict[str, VirtualDevice], show: Progress, *, first: bool) -> None:  # fmt: skip
    """Put `side`'s build on the devices (on the first deploy, Linux boards' OS images too, as the nightly does)."""
    show(f"deploying the {side} build")
    started = time.monotonic()
    flashed = await flash_devices(devices, opts.work, lambda d: lambda *a: None, os=first,
                                  boards=board_controls(running))  # fmt: skip
    result.timings.append((f"deploy ({side})", time.monotonic() - started))
    for f in flashed:
        if not f.ok:
            outcome = f.outcome
            if side == CANDIDATE and f.refused:  # the candidate itself was refused (a model that does not convert)
                outcome = product(f"the candidate did not deploy: {f.reason}")
            result.note(f.name, outcome if outcome.cls != FailureClass.PASS else infrastructure(f.reason))


def judge_session(store: ResultStore, check: SessionCheck, thresholds: Thresholds, devices: list[str]) -> list[Verdict]:
    """Each device's candidate replays, each against the baseline replays, settled by majority; stored with the
    last candidate run (no run of a check joins a baseline)."""
    base, candidate = tuple(check.runs[BASE]), check.runs[CANDIDATE]
    if not base or not candidate:
        return []
    verdicts = []
    for device in devices:
        per_run = [judge_run(store, run, thresholds, devices=[device], window_runs=base) for run in candidate]
        verdicts += [settle(v) for v in majority(per_run)]
    record_verdicts(store, candidate[-1], verdicts)
    return verdicts

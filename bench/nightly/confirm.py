"""Confirm before accusing: the nightly's verdicts on each session run, with a replay of every suspected
regression on its device and on one unchanged control device, judged against the same baseline window.

A suspected regression that the replay shows again is a regression, as is one of a figure counted in
instructions whose replay is worse by the floor and that the night and the replay together show against the
window (bench.results.verdict.confirmed); one that it does not is "not reproduced", with both figures and the
control device's. Verdicts and baseline membership are stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bench.config.fleet import Device
from bench.core.outcomes import FailureClass, Outcome
from bench.core.units import figure
from bench.results.evidence import record_verdicts, window
from bench.results.judge import acceptance, counted, judge_run
from bench.results.thresholds import Thresholds
from bench.results.verdict import REGRESSION, SUSPECTED, Verdict, Window, confirmed, settle
from bench.store.results import ResultStore

# replay(session file, devices, run kind) -> the new run's id
Replay = Callable[[str, list[Device]], Awaitable[int]]


@dataclass
class Confirmation:
    """The final verdicts of one session run, and the confirm run that checked them (if one was needed)."""

    run_id: int
    verdicts: list[Verdict]
    confirm_run: int | None = None
    control: str | None = None
    causes: dict[str, str] = field(default_factory=dict)  # device -> what caused its regression (attribution)

    def merged(self, other: Confirmation) -> Confirmation:
        """This session run's verdicts with those of `other` (the retry of its infrastructure failures)."""
        return Confirmation(self.run_id, self.verdicts + other.verdicts, self.confirm_run or other.confirm_run,
                            self.control or other.control, {**self.causes, **other.causes})  # fmt: skip


def pick_control(devices: list[Device], suspects: set[str]) -> Device | None:
    """An unchanged device to replay alongside the suspects: same kind as a suspect if possible."""
    others = [d for d in devices if d.name not in suspects]
    kinds = {d.kind for d in devices if d.name in suspects}
    return next((d for d in others if d.kind in kinds), others[0] if others else None)


async def confirm_run(
    store: ResultStore,
    run_id: int,
    session_file: str,
    devices: list[Device],
    thresholds: Thresholds,
    replay: Replay | None,
    *,
    pinned: int | None = None,
    judged: list[str] | None = None,
) -> Confirmation:
    """Judge run `run_id` (only the `judged` devices, if given: a device whose run failed on the bench's side has
    figures of a hang, not of the product), replay its suspected regressions (when `replay` is given), store the
    final verdicts and which devices join later baselines (none whose run did not pass: bench.core.outcomes). The
    nights of a confirmed drift, tonight's included, leave the baseline windows (a window that held them would
    absorb the drift)."""
    first = judge_run(store, run_id, thresholds, pinned=pinned, devices=judged)
    suspects = {v.device for v in first if v.status == SUSPECTED}
    result = Confirmation(run_id, [settle(v) for v in first])
    if suspects and replay is not None:
        control = pick_control(devices, suspects)
        replayed = [d for d in devices if d.name in suspects] + ([control] if control else [])
        again = await replay(session_file, replayed)
        second = {
            (v.device, v.metric): v
            for v in judge_run(
                store, again, thresholds, against=run_id, pinned=pinned, devices=[d.name for d in replayed]
            )
        }
        by_key = {(v.device, v.metric): v for v in first}
        pooled = counted_windows(store, run_id, thresholds, [v for v in first if v.status == SUSPECTED], pinned)
        final = []
        for v in first:
            note = ""
            if control is not None and v.status == SUSPECTED:
                before, after = by_key.get((control.name, v.metric)), second.get((control.name, v.metric))
                unit = v.unit
                note = f"{control.name} {_fig(before, unit)} then {_fig(after, unit)}"
            pool = pooled.get((v.device, v.metric))
            final.append(confirmed(v, second.get((v.device, v.metric)), note, pool))
        result = Confirmation(run_id, final, again, control.name if control else None)
    record_verdicts(store, run_id, result.verdicts)
    for dev in store.runs.devices(run_id):
        ok, why = acceptance(result.verdicts, dev.name, dev.status)
        outcome = Outcome.from_json(dev.info["outcome"]) if dev.info.get("outcome") else None
        if ok and outcome is not None and outcome.cls != FailureClass.PASS:
            ok, why = False, outcome.label
        store.windows.accept(run_id, dev.name, ok, why)
    session = store.runs.run(run_id).session or ""
    for v in result.verdicts:
        if v.status == REGRESSION and v.is_drift:
            store.windows.leave_window(
                session, v.device, v.drift_since, run_id, f"{v.metric} since run {v.drift_since}"
            )
    return result


def counted_windows(
    store: ResultStore, run_id: int, thresholds: Thresholds, suspects: list[Verdict], pinned: int | None
) -> dict[tuple[str, str], Window]:
    """(device, metric) -> the window a suspect of run `run_id` was judged against, for the suspects whose figure is
    counted in instructions (judge.counted): their night and replay are pooled against it (verdict.confirmed)."""
    prints = store.verdicts.fingerprints(run_id)
    session = store.runs.run(run_id).session or ""
    out = {}
    for v in suspects:
        rule = thresholds.rule(v.metric)
        flags = next((m.flags for m in store.measures.measurements(run_id, v.device) if m.name == rule.measurement), ())
        if counted(rule, prints.get(v.device, {}), flags):
            out[(v.device, v.metric)] = window(store, session, v.device, rule.measurement, before=run_id,
                                               size=thresholds.baseline_runs, pinned=pinned)  # fmt: skip
    return out


def _fig(v: Verdict | None, unit: str) -> str:
    return figure(v.run_value if v else None, unit)

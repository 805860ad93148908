"""Retention of raw rows: a run's frame and input rows are kept while it is younger than `keep_raw_days` or
among the last `keep_raw_runs` runs of its device and session (the fleet's `[results]` table,
bench.config.fleet.RawRetention); then they are deleted. Measurements, histograms, verdicts, fingerprints, faults,
model-update records, host noise, telemetry and device health stay forever, so an old run's report still
renders (without its frame-interval plot and fault timeline, which say they were pruned).

Runs after every nightly (its summary's `retention`) and as `hilbench results prune`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from bench.config.fleet import RawRetention
from bench.store.results import ResultStore

UNFINISHED = ("running",)  # a run still being written keeps its raw rows


@dataclass
class PruneResult:
    """What a prune removed (or, in a dry run, would remove), and the store's size around it."""

    policy: RawRetention
    dry_run: bool
    size_before: int
    size_after: int
    pruned: list[tuple[int, str]] = field(default_factory=list)  # (run id, device) whose raw rows went
    kept: int = 0  # device parts of runs whose raw rows stay
    frames: int = 0  # frame records removed (counted per frame, also when stored packed)
    inputs: int = 0  # input rows removed (counted per input, also when stored packed)

    def to_json(self) -> dict:
        """JSON-ready summary (`hilbench results prune --json`, the nightly's `retention`)."""
        return {
            "keep_raw_days": self.policy.keep_raw_days,
            "keep_raw_runs": self.policy.keep_raw_runs,
            "dry_run": self.dry_run,
            "size_before_bytes": self.size_before,
            "size_after_bytes": self.size_after,
            "pruned_runs": len({run for run, _ in self.pruned}),
            "pruned_device_runs": len(self.pruned),
            "kept_device_runs": self.kept,
            "frames_removed": self.frames,
            "inputs_removed": self.inputs,
        }

    def line(self) -> str:
        """One line for a human."""
        verb = "would remove" if self.dry_run else "removed"
        return (
            f"results retention (raw rows: {self.policy.keep_raw_days} days or the last {self.policy.keep_raw_runs}"
            f" runs per device and session): {verb} {self.frames} frame and {self.inputs} input rows of"
            f" {len(self.pruned)} device run(s), kept {self.kept}; store {_mb(self.size_before)} -> "
            f"{_mb(self.size_after)}"
        )


def to_prune(
    store: ResultStore, policy: RawRetention, now: dt.datetime | None = None
) -> tuple[list[tuple[int, str]], int]:
    """(run id, device) parts whose raw rows the policy lets go, and how many it keeps."""
    cutoff = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=policy.keep_raw_days)
    seen: dict[tuple[str, str | None], int] = {}  # (device, session) -> runs of it seen, newest first
    prune, kept = [], 0
    for run_id, device, session, started_at, status in store.raw.holders():
        rank = seen.get((device, session), 0)
        seen[(device, session)] = rank + 1
        young = dt.datetime.fromisoformat(started_at) >= cutoff
        if status in UNFINISHED or young or rank < policy.keep_raw_runs:
            kept += 1
        else:
            prune.append((run_id, device))
    return prune, kept


def prune(
    store: ResultStore, policy: RawRetention, *, dry_run: bool = False, now: dt.datetime | None = None
) -> PruneResult:
    """Delete the raw rows the policy lets go and reclaim their space (VACUUM); with `dry_run`, only count them."""
    parts, kept = to_prune(store, policy, now)
    size = store.raw.size_bytes()
    result = PruneResult(policy, dry_run, size, size, parts, kept)
    for run_id, device in parts:
        if dry_run:
            frames, inputs = store.frames.frame_count(run_id, device), store.frames.input_count(run_id, device)
        else:
            frames, inputs = store.raw.prune(run_id, device)
        result.frames += frames
        result.inputs += inputs
    if parts and not dry_run:
        store.raw.reclaim_space()
        result.size_after = store.raw.size_bytes()
    return result


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"

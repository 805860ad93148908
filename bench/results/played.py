"""Whether a counted device was given its inputs as on its baseline's nights: the played fingerprint against theirs.

A device replayed on its own counted clock gets every input at the counted time its timestamp says (docs/replay.md),
so each night its inferences see the same inputs and its counted figures depend on the session, the model and the
firmware only. A night where that did not hold measured something else: an input reached the agent after it was due,
it played fewer frames than its baseline runs (less of the session), or its inferences saw more or fewer inputs each
over the frames both played. Fewer frames count only where the baseline runs all played the same number (a device
that plays a fixed span of the session, `replay_span_s`); one that plays what fits its budget plays more or less
each night by design, and its page says how much. Then its counted figures are "inconclusive: the inputs reached the
device differently (host busy)", naming the difference, and never a regression (bench.results.judge). A model that
takes longer moves an inference's start by its extra time at most: an input due in between goes to the next
inference, which leaves the mean over the frames played (what is compared) where it was."""

from __future__ import annotations

from collections.abc import Sequence

from bench.measure.played import Played, played
from bench.store.results import ResultStore

FRAMES_PCT = 2.0  # fewer frames played than the baseline runs' fewest by more than this
PER_FRAME_PCT = 1.0  # inputs per inference over the frames both played: off the closest baseline run by more than this


def stored_played(store: ResultStore, run_id: int, device: str) -> Played | None:
    """The fingerprint of a stored run from its frames and inputs (None when it has none: not replayed on its own
    clock, or its raw rows were pruned)."""
    late = next((m.value for m in store.measures.measurements(run_id, device) if m.name == "played_late"), None)
    if late is None:
        return None
    sent = store.frames.inputs(run_id, device)
    given = played(store.frames.frames(run_id, device), list(sent), [{"held_late": late}])
    return given if given.frames else None


def played_difference(store: ResultStore, run_id: int, device: str, baseline_runs: Sequence[int]) -> str | None:
    """How what `device` was given in run `run_id` differs from its `baseline_runs` beyond the counted noise, in a few
    words; None when it does not, or when the run or its baseline has no fingerprint."""
    mine = stored_played(store, run_id, device)
    base = [p for p in (stored_played(store, r, device) for r in baseline_runs) if p is not None]
    if mine is None or not base:
        return None
    out = []
    late, base_late = mine.late or 0, max(p.late or 0 for p in base)
    if late > base_late:
        out.append(f"{late} inputs reached it after they were due (its baseline runs: at most {base_late})")
    fewest, most = min(p.frames for p in base), max(p.frames for p in base)
    fixed = most <= fewest * (1 + FRAMES_PCT / 100)  # a fixed span (replay_span_s), not what fitted a budget
    if fixed and mine.frames < fewest * (1 - FRAMES_PCT / 100):
        out.append(f"{mine.frames} frames played, its baseline runs at least {fewest}")
    closest = min((_per_frame_pct(mine, p) for p in base), key=abs)
    if abs(closest) > PER_FRAME_PCT:
        out.append(f"inputs per inference {closest:+.1f}% over the frames both played")
    return "; ".join(out) or None


def _per_frame_pct(mine: Played, theirs: Played) -> float:
    """Mine against theirs, inputs per inference over the frames both played (%)."""
    n = min(mine.frames, theirs.frames)
    a, b = sum(mine.per_frame[:n]), sum(theirs.per_frame[:n])
    return (a / b - 1) * 100 if b else 0.0

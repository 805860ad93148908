"""One verdict per device and metric over k replays of one build, each judged on its own (bench.results.judge):
a regression is suspected when a majority of the replays show it, and the bench host was busy when a majority of
them were inconclusive. The pre-merge check and the bisection judge their builds so."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import replace

from bench.results.verdict import INCONCLUSIVE, SUSPECTED, UNCHANGED, Verdict


def majority(per_run: Iterable[Iterable[Verdict]]) -> list[Verdict]:
    """The verdicts of k runs (one list per run) as one per device and metric, in first-seen order. Its figure is
    the median of the runs' figures, its effect their median effect; the rest of its evidence is a run's."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    runs = 0
    for verdicts in per_run:
        runs += 1
        for v in verdicts:
            groups.setdefault((v.device, v.metric), []).append(v)
    return [_combined(vs, runs) for vs in groups.values()]


def _combined(verdicts: list[Verdict], runs: int) -> Verdict:
    needed = runs // 2 + 1
    hits = [v for v in verdicts if v.status == SUSPECTED]
    busy = [v for v in verdicts if v.status == INCONCLUSIVE]
    values = [v.run_value for v in verdicts if v.run_value is not None]
    effects = [v.effect_pct for v in verdicts if v.effect_pct is not None]
    figures = {
        "run_value": statistics.median(values) if values else None,
        "effect_pct": statistics.median(effects) if effects else None,
    }
    if len(hits) >= needed:
        median = figures["effect_pct"]
        worse = f" (median {median:+.1f}%)" if median is not None else ""
        return replace(hits[0], **figures, reason=f"{len(hits)} of {runs} runs worse{worse}; {hits[0].reason}")
    if len(busy) >= needed:
        return replace(busy[0], **figures, reason=f"{len(busy)} of {runs} runs {busy[0].reason}")
    rest = [v for v in verdicts if v.status not in (SUSPECTED, INCONCLUSIVE)]
    if rest:
        note = f" ({len(hits)} of {runs} runs worse: no majority)" if hits else ""
        return replace(rest[0], **figures, reason=rest[0].reason + note)
    worse = f"{len(hits)} of {runs} runs worse, {len(busy)} inconclusive: no majority"
    return replace(verdicts[0], **figures, status=UNCHANGED, reason=worse)

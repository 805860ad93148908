"""What a verdict rests on, read back as verdicts and windows: the stored verdicts of a run (bench.store.verdicts)
and the baseline window and drift series of a device's measurement (bench.store.windows)."""

from __future__ import annotations

from collections.abc import Iterable

from bench.results.verdict import REGRESSION, Verdict, Window
from bench.store import stored
from bench.store.results import ResultStore
from bench.store.verdicts import VerdictRow

HISTORY_RUNS = 20  # accepted runs whose spread a verdict may use when it is wider than the window's


def record_verdicts(store: ResultStore, run_id: int, verdicts: list[Verdict]) -> None:
    """The final verdicts of a run (replacing earlier ones of the same device and metric)."""
    store.verdicts.record_verdicts(run_id, [(v.device, v.metric, v.status, v.to_dict()) for v in verdicts])


def stored_verdicts(store: ResultStore, run_id: int) -> list[Verdict]:
    """The verdicts recorded for a run (empty when it was never judged)."""
    return verdicts_of(store.verdicts.verdicts(run_id), store.label)


def verdicts_of(rows: Iterable[VerdictRow], label: str = "") -> list[Verdict]:
    """Stored verdict rows as verdicts (a DamagedStore naming the store `label` and the row for one that is not)."""
    out = []
    for row in rows:
        fields = dict(row.data)
        try:
            fields["baseline_runs"] = tuple(fields.get("baseline_runs") or ())
            out.append(Verdict(**fields))
        except TypeError as exc:
            where = f"({row.run_id}, {row.device!r}, {row.metric!r})"
            raise stored.DamagedStore(
                f"results store {label}: table verdicts, row {where}, field data: not a verdict ({exc})",
                file=label,
                field="verdicts.data",
            ) from None
    return out


def window(
    store: ResultStore,
    session: str,
    device: str,
    measurement: str,
    *,
    before: int,
    size: int,
    pinned: int | None,
    only: tuple[int, ...] | None = None,
) -> Window:
    """The last `size` accepted runs of `session` on `device` before run `before` (or up to and including the
    `pinned` run) that have `measurement`, with its values, oldest first; plus the values of the last
    HISTORY_RUNS such runs (the spread of a heavy-tailed figure needs more than five). A pre-merge check's runs
    are never in it. With `only`, the window is those runs (a check's baseline replays), accepted or not."""
    if only is not None:
        rows = store.windows.of_runs(device, measurement, only)
        return Window(tuple(r for r, _ in rows), tuple(v for _, v in rows), len(only))
    last = pinned if pinned is not None else before
    rows = store.windows.accepted(
        session, device, measurement, last=last, inclusive=pinned is not None, limit=max(size, HISTORY_RUNS)
    )
    recent = rows[-size:]
    history = tuple(v for _, v in rows) if len(rows) > size else ()
    return Window(tuple(r for r, _ in recent), tuple(v for _, v in recent), size, pinned, history)


def series(
    store: ResultStore, session: str, device: str, measurement: str, *, before: int, limit: int
) -> tuple[list[int], list[float]]:
    """The last `limit` judged nights of `session` on `device` before run `before` that have `measurement`: the
    accepted ones and those that left the window for belonging to a drift, as (run ids, values), oldest first."""
    rows = store.windows.series(session, device, measurement, before=before, limit=limit)
    return [r for r, _ in rows], [v for _, v in rows]


def regression_nights(
    store: ResultStore, session: str, device: str, metric: str, measurement: str, *, after: int, before: int, limit: int
) -> tuple[list[int], list[float]]:
    """The nights of `session` on `device` after run `after` and before run `before` whose stored verdict on
    `metric` is a regression, or that left the window for belonging to a drift, with their `measurement`, as
    (run ids, values), oldest first, at most the last `limit` (bench.results.drift.find_creep)."""
    rows = store.windows.flagged(
        session, device, metric, measurement, REGRESSION, after=after, before=before, limit=limit
    )
    return [r for r, _ in rows], [v for _, v in rows]

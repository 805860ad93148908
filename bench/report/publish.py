"""One call from a stored run to its verdicts and its written report: what `hilbench nightly` and
`hilbench report` use.

    with open_store(results) as store:
        published = publish_run(store, run_id)
    return published.exit_code  # 1 when a metric regressed
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.alerts import night_alerts
from bench.bundles.fingerprint import changes
from bench.core.errors import ConfigError, ExitCode
from bench.core.paths import OUTPUT_DIR
from bench.report.build import Report, build_report
from bench.report.history import load_history
from bench.report.html import write_comparison, write_report
from bench.report.measures import device_timing
from bench.report.nights import load_grids
from bench.report.runview import RunView
from bench.report.view_adapter import load_run
from bench.results.baseline import get_baseline
from bench.results.bisect import offer
from bench.results.evidence import fingerprints, host_of, stored_verdicts
from bench.results.judge import judge_run
from bench.results.thresholds import Thresholds, load_thresholds
from bench.results.verdict import REGRESSION, Verdict, settle
from bench.store.results import UPDATE_RUN_KIND, ResultStore

DEFAULT_REPORTS = OUTPUT_DIR


@dataclass
class Published:
    """A run's verdicts and report, and where the report was written."""

    report: Report
    verdicts: list[Verdict]
    page: Path | None
    baseline_run_id: int | None

    @property
    def regressions(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == REGRESSION]

    @property
    def exit_code(self) -> ExitCode:
        """FAILED (1) when any metric regressed, else OK."""
        return ExitCode.FAILED if self.regressions else ExitCode.OK


def publish_run(
    store: ResultStore,
    run_id: int,
    *,
    reports_dir: Path | None = DEFAULT_REPORTS,
    baseline_name: str | None = None,
    compare_run: int | None = None,
    thresholds: Thresholds | str | Path | None = None,
) -> Published:
    """Judge run `run_id` and write its report under `reports_dir` (None: do not write).

    Verdicts are the ones the nightly stored (after confirmation) when the run has them and no other baseline is
    asked for; otherwise the run is judged now (without a replay) against the window of accepted runs of its
    session ending before it, or ending at `compare_run` or at the run the named baseline pins. With
    `compare_run` the page goes to compare/<run>-vs-<other>.html."""
    rules = thresholds if isinstance(thresholds, Thresholds) else load_thresholds(thresholds)
    run = load_run(store, run_id)
    pinned = compare_run
    if pinned is None and baseline_name:
        named = get_baseline(store, baseline_name)
        if named is None:
            raise ConfigError(f"--baseline {baseline_name}: no such baseline", hint="see `hilbench baseline list`")
        pinned = named.run_id if named.run_id != run_id else None
    verdicts = stored_verdicts(store, run_id) if pinned is None else []
    if not verdicts and run.label != UPDATE_RUN_KIND:  # the update-and-faults run has no performance figures to judge
        verdicts = [settle(v) for v in judge_run(store, run_id, rules, pinned=pinned)]
    shown = pinned if pinned is not None else max((max(v.baseline_runs, default=0) for v in verdicts), default=0)
    base: RunView | None = load_run(store, shown, frames=False) if shown else None
    prints = fingerprints(store, run_id)
    report = build_report(
        run,
        verdicts=verdicts,
        baseline=base,
        baseline_name=baseline_name if compare_run is None and pinned is not None else None,
        history=load_history(store, up_to=run_id, kind=run.label or None, session=run.meta.get("session")),
        thresholds_file=str(rules.path),
        what_changed=what_changed(store, run_id, verdicts, pinned),
        host=host_of(store, run_id),
        clocks={
            device: device_timing(fp.get("clock"), fp.get("latency_clock"), fp.get("platform"))
            for device, fp in prints.items()
        },
        virtual=frozenset(device for device, fp in prints.items() if fp.get("virtual")),
        bisect=bisect_offers(store, run_id, verdicts),
        alerts=night_alerts(store, [run_id], rules.alerts).to_json(),
    )
    page = None
    if reports_dir is not None:
        page = (
            write_report(report, reports_dir, grids=load_grids(store, rules))
            if compare_run is None
            else write_comparison(report, reports_dir, str(compare_run))
        )
    return Published(report, verdicts, page, shown or None)


def bisect_offers(store: ResultStore, run_id: int, verdicts: list[Verdict]) -> dict[str, str]:
    """device -> the `hilbench bisect` command that finds the first bad build of each confirmed regression (its
    worst metric), over the git range from the newest baseline run's bench revision to this run's."""
    row = store.run(run_id)
    session_file = str(row.config.get("session_file") or "SESSION.mcap")
    offers: dict[str, str] = {}
    worst = sorted((v for v in verdicts if v.status == REGRESSION), key=lambda v: -(v.effect_pct or 0.0))
    for v in worst:
        if v.device in offers:
            continue
        base = store.run(max(v.baseline_runs)) if v.baseline_runs else None
        offers[v.device] = offer(v.device, session_file, v.metric, (base.git_rev if base else None, row.git_rev))
    return offers


def what_changed(store: ResultStore, run_id: int, verdicts: list[Verdict], pinned: int | None) -> dict[str, list[str]]:
    """device -> what differs in its fingerprint from the newest run of its own baseline window (the pinned run,
    when a baseline is pinned); [] when nothing did. Devices without a baseline run are left out."""
    now = fingerprints(store, run_id)
    newest: dict[str, int] = {}
    for v in verdicts:
        if v.baseline_runs:
            newest[v.device] = max(newest.get(v.device, 0), *v.baseline_runs)
    out = {}
    for device, fp in now.items():
        base_run = pinned if pinned is not None else newest.get(device)
        then = fingerprints(store, base_run).get(device) if base_run else None
        if then is not None:
            out[device] = changes(fp, then)
    return out

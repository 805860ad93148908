"""One call from a stored run to its verdicts and its written report: what `hilbench nightly` and
`hilbench report` use. The run, its verdicts and baseline, its history and what the report names about them are
read from the store once (`load_stored_run`), and the report is rendered from that (`report_of`).

    with open_store(results) as store:
        published = publish_run(store, run_id)
    return published.exit_code  # 1 when a metric regressed
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.alerts.night import split_night
from bench.bundles.fingerprint import changes
from bench.core.errors import ConfigError, ExitCode
from bench.core.paths import OUTPUT_DIR
from bench.report.build import TREND_RUNS, HistoryPoint, Report, build_report
from bench.report.history import history_of
from bench.report.html import write_comparison, write_report
from bench.report.nights import load_grids
from bench.report.runview import RunView
from bench.report.view_adapter import view_of
from bench.results.bisect import offer
from bench.results.clocks import fingerprint_timing
from bench.results.evidence import verdicts_of
from bench.results.judge import judge_run
from bench.results.thresholds import Thresholds, load_thresholds
from bench.results.verdict import REGRESSION, Verdict, settle
from bench.store.results import ResultStore
from bench.store.runs import UPDATE_RUN_KIND

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


@dataclass
class StoredRun:
    """Everything a run's report shows, read from the results store once (`load_stored_run`); the report is
    rendered from this alone."""

    run: RunView
    verdicts: list[Verdict]
    pinned: int | None  # the run a named baseline or --compare pins, else None (the baseline window)
    baseline: RunView | None  # the run compared with: the pinned one, else the newest of the baseline window
    history: list[HistoryPoint]
    fingerprints: dict[int, dict[str, dict[str, Any]]]  # run id -> device -> fingerprint: this run and its bases
    host: dict | None
    git_revs: dict[int, str | None]  # run id -> the bench revision: this run and each verdict's newest base
    session_file: str
    alerts: dict

    @property
    def run_id(self) -> int:
        return int(self.run.run_id)

    def newest_base(self, device: str) -> int | None:
        """The run `device` is compared with: the pinned one, else the newest of its own baseline window."""
        if self.pinned is not None:
            return self.pinned
        return max(
            (max(v.baseline_runs) for v in self.verdicts if v.device == device and v.baseline_runs), default=None
        )


def load_stored_run(store: ResultStore, run_id: int, rules: Thresholds, *, pinned: int | None = None) -> StoredRun:
    """Run `run_id`, its verdicts (the stored ones when it has them and nothing is pinned; else judged now,
    without a replay, against the window of accepted runs ending before it or at `pinned`), the run it is
    compared with, its history and the fingerprints, host and revisions the report names."""
    page = store.reading.page(run_id, pinned=pinned, trend=TREND_RUNS)
    verdicts = verdicts_of(page.verdicts, store.label)
    baseline, fingerprints, git_revs = page.baseline, page.fingerprints, page.git_revs
    if not verdicts and page.record.run.kind != UPDATE_RUN_KIND:  # the update-and-faults run has no figures to judge
        verdicts = [settle(v) for v in judge_run(store, run_id, rules, pinned=pinned)]
        shown = pinned if pinned is not None else max((max(v.baseline_runs, default=0) for v in verdicts), default=0)
        bases = {max(v.baseline_runs) for v in verdicts if v.baseline_runs} | ({pinned} - {None})
        if shown != pinned or page.baseline is None:  # the pinned run is in the page already
            baseline = store.reading.run(shown, frames=False) if shown else None
        fingerprints = store.reading.fingerprints({run_id, *bases})
        git_revs = store.reading.revisions({run_id, *bases})
    return StoredRun(
        run=view_of(page.record),
        verdicts=verdicts,
        pinned=pinned,
        baseline=view_of(baseline) if baseline is not None else None,
        history=history_of(page.history),
        fingerprints=fingerprints,
        host=page.host,
        git_revs=git_revs,
        session_file=str(page.record.run.config.get("session_file") or "SESSION.mcap"),
        alerts=split_night(page.night, store.label, rules.alerts).to_json(),
    )


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
    pinned = compare_run
    if pinned is None and baseline_name:
        named = store.windows.named(baseline_name)
        if named is None:
            raise ConfigError(f"--baseline {baseline_name}: no such baseline", hint="see `hilbench baseline list`")
        pinned = named.run_id if named.run_id != run_id else None
    stored_run = load_stored_run(store, run_id, rules, pinned=pinned)
    report = report_of(stored_run, rules, baseline_name if compare_run is None and pinned is not None else None)
    page = None
    if reports_dir is not None:
        page = (
            write_report(report, reports_dir, grids=load_grids(store, rules))
            if compare_run is None
            else write_comparison(report, reports_dir, str(compare_run))
        )
    baseline_run_id = int(stored_run.baseline.run_id) if stored_run.baseline is not None else None
    return Published(report, stored_run.verdicts, page, baseline_run_id)


def report_of(stored_run: StoredRun, rules: Thresholds, baseline_name: str | None = None) -> Report:
    """The report of a loaded run (nothing more is read from the store)."""
    prints = stored_run.fingerprints[stored_run.run_id]
    return build_report(
        stored_run.run,
        verdicts=stored_run.verdicts,
        baseline=stored_run.baseline,
        baseline_name=baseline_name,
        history=stored_run.history,
        thresholds_file=str(rules.path),
        what_changed=what_changed(stored_run),
        host=stored_run.host,
        clocks={device: fingerprint_timing(fp) for device, fp in prints.items()},
        virtual=frozenset(device for device, fp in prints.items() if fp.get("virtual")),
        bisect=bisect_offers(stored_run),
        alerts=stored_run.alerts,
    )


def bisect_offers(stored_run: StoredRun) -> dict[str, str]:
    """device -> the `hilbench bisect` command that finds the first bad build of each confirmed regression (its
    worst metric), over the git range from the newest baseline run's bench revision to this run's."""
    offers: dict[str, str] = {}
    worst = sorted((v for v in stored_run.verdicts if v.status == REGRESSION), key=lambda v: -(v.effect_pct or 0.0))
    for v in worst:
        if v.device in offers:
            continue
        base = stored_run.git_revs.get(max(v.baseline_runs)) if v.baseline_runs else None
        revs = (base, stored_run.git_revs[stored_run.run_id])
        offers[v.device] = offer(v.device, stored_run.session_file, v.metric, revs)
    return offers


def what_changed(stored_run: StoredRun) -> dict[str, list[str]]:
    """device -> what differs in its fingerprint from the newest run of its own baseline window (the pinned run,
    when a baseline is pinned); [] when nothing did. Devices without a baseline run are left out."""
    out = {}
    for device, fp in stored_run.fingerprints[stored_run.run_id].items():
        base_run = stored_run.newest_base(device)
        then = stored_run.fingerprints.get(base_run, {}).get(device) if base_run else None
        if then is not None:
            out[device] = changes(fp, then)
    return out

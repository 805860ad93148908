"""One call from a stored run to its verdicts and its written report: what `hilbench nightly` and
`hilbench report` use.

    with open_store(results) as store:
        published = publish_run(store, run_id, baseline_name="default")
    return published.exit_code  # 1 when a metric regressed
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.errors import ExitCode
from bench.report.build import Report, build_report
from bench.report.history import load_history
from bench.report.html import write_comparison, write_report
from bench.results.baseline import DEFAULT_BASELINE, get_baseline
from bench.results.runview import RunView
from bench.results.store import ResultStore
from bench.results.thresholds import Thresholds, load_thresholds
from bench.results.verdict import REGRESSION, Verdict, compare_runs
from bench.results.view_adapter import load_run

DEFAULT_REPORTS = Path("reports")


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
    baseline_name: str = DEFAULT_BASELINE,
    compare_run: int | None = None,
    thresholds: Thresholds | str | Path | None = None,
) -> Published:
    """Compare run `run_id` with `compare_run` (or the named baseline, if set and not the run itself), build its
    report with trends over the previous runs, and write it under `reports_dir` (None: do not write): the run's
    page, latest.html and the index; or, with `compare_run`, a separate compare/<run>-vs-<other>.html."""
    rules = thresholds if isinstance(thresholds, Thresholds) else load_thresholds(thresholds)
    run = load_run(store, run_id)
    against = compare_run
    if against is None:
        named = get_baseline(store, baseline_name)
        against = named.run_id if named and named.run_id != run_id else None
    base: RunView | None = load_run(store, against, frames=False) if against is not None else None
    verdicts = compare_runs(run, base, rules) if base is not None else []
    report = build_report(
        run,
        verdicts=verdicts,
        baseline=base,
        baseline_name=baseline_name if compare_run is None and base is not None else None,
        history=load_history(store, up_to=run_id, kind=run.label or None),  # trends over runs of the same kind
        thresholds_file=str(rules.path),
    )
    page = None
    if reports_dir is not None:
        page = (
            write_report(report, reports_dir)
            if compare_run is None
            else write_comparison(report, reports_dir, str(compare_run))
        )
    return Published(report, verdicts, page, against)

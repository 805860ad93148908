"""`hilbench report [RUN] [--compare RUN]` and `hilbench baseline set|list`."""

from __future__ import annotations

import argparse
from contextlib import nullcontext

from rich.markup import escape

from bench.commands import add_output_dir, add_verdict_options
from bench.core.console import emit_json, err, out
from bench.core.errors import ConfigError, ExitCode
from bench.results.baseline import set_baseline
from bench.store.results import ResultStore, open_store
from bench.store.windows import DEFAULT_BASELINE


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` and `baseline` commands."""
    p = sub.add_parser("report", help="render a run's HTML report with its verdicts (exit 1 on a regression)")
    p.add_argument("run", nargs="?", help='run id or "latest" (default: the latest run)')
    p.add_argument("--compare", metavar="RUN", help="compare with this run instead of the baseline")
    add_verdict_options(p, baseline="the last accepted runs")
    _store_options(p)
    add_output_dir(p, "--out")
    p.set_defaults(func=cmd_report)

    b = sub.add_parser("baseline", help="name the runs later runs are compared with")
    bsub = b.add_subparsers(dest="baseline_command", required=True)
    p = bsub.add_parser("set", help="make RUN the baseline NAME")
    p.add_argument("run", help='run id, or "latest"')
    p.add_argument("--name", default=DEFAULT_BASELINE, help="baseline name (default: default)")
    _store_options(p)
    p.set_defaults(func=cmd_baseline_set)
    p = bsub.add_parser("list", help="list the baselines")
    _store_options(p)
    p.set_defaults(func=cmd_baseline_list)


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", metavar="PATH", help="results store (default: reports/results.sqlite)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def run_id_arg(value: str | None, what: str) -> int | None:
    """A run id from the command line (None stays None)."""
    if value is None:
        return None
    try:
        run_id = int(value)
    except ValueError:
        raise ConfigError(f"{what} {value!r}: run ids are numbers (see the reports index)") from None
    if not 0 < run_id < 2**63:  # a store's row ids are 64-bit
        raise ConfigError(f"{what} {value}: no such run (run ids are 1 to {2**63 - 1})", hint="see the reports index")
    return run_id


def latest_or(store: ResultStore, value: str) -> int:
    """The run id `value` names: a number, or "latest" for the newest run in the store."""
    if value != "latest":
        return run_id_arg(value, "run")
    latest = store.runs.latest(limit=1)
    if not latest:
        raise ConfigError(f"results store {store.path}: no runs yet", hint="run `hilbench nightly` first")
    return latest[0].id


def cmd_report(args: argparse.Namespace) -> int:
    """Render (or re-render) a run's report; print where it went and the verdict. A spinner on stderr says what
    it does meanwhile (loading the statistics and templates, judging, rendering)."""
    with err.status("loading the report renderer…") if not args.json else nullcontext() as status:
        from bench.report.publish import publish_run  # here, under the spinner: it loads scipy and jinja2

        with open_store(args.results) as store:
            run_id = latest_or(store, args.run or "latest")
            if status is not None:
                status.update(f"judging and rendering the report of run {run_id}…")
            try:
                published = publish_run(
                    store, run_id, reports_dir=args.output_dir, baseline_name=args.baseline,
                    compare_run=run_id_arg(args.compare, "--compare run"), thresholds=args.thresholds,
                )  # fmt: skip
            except OSError as exc:
                raise ConfigError(
                    f"--output-dir {args.output_dir}: cannot write the report: {exc.strerror} ({exc.filename})"
                ) from None
    if args.json:
        emit_json({**published.report.data, "page": str(published.page)})
    else:
        _print_report(published)
    return published.exit_code


def _print_report(published) -> None:
    """Where the report went, the regressions and improvements, and the verdict."""
    from bench.report.html import ptext
    from bench.results.verdict import IMPROVED, REGRESSION

    outcome = published.report.data["outcome"]
    out.print(f"report: {published.page}")
    if outcome["collecting"]:
        out.print(outcome["collecting"] + ": verdicts start when the window is full")
    for device in published.report.data["devices"]:
        for v in device["verdicts"]:
            if v["status"] not in (REGRESSION, IMPROVED):
                continue
            colour = "red" if v["status"] == REGRESSION else "green"
            since = f", since run {v['since']['run_id']}" if v.get("since") else ""
            if v.get("drift_since") is not None:  # "drift: inference time P50 +31% since run 12 (7 nights), p = ..."
                out.print(f"[red]regression[/red] {escape(device['name'])} {escape(v['reason'].split(';')[0])}")
                continue
            out.print(
                f"[{colour}]{v['status']}[/{colour}] {escape(device['name'])} {escape(v['title'])}: "
                f"{v['effect_pct']:+.1f}% ({ptext(v['p_value'])}, {v['n_baseline']} baseline runs){since}"
            )
    if published.baseline_run_id is not None:
        out.print(f"verdict against the runs up to {published.baseline_run_id}: {outcome['verdict']}")


def cmd_baseline_set(args: argparse.Namespace) -> int:
    """Point a baseline name at a run."""
    with open_store(args.results) as store:
        baseline = set_baseline(store, latest_or(store, args.run), args.name)
    if args.json:
        emit_json(vars(baseline))
    else:
        out.print(f"baseline {baseline.name} = run {baseline.run_id}")
    return ExitCode.OK


def cmd_baseline_list(args: argparse.Namespace) -> int:
    """Print the baselines."""
    with open_store(args.results) as store:
        baselines = store.windows.all_named()
    if args.json:
        emit_json([vars(b) for b in baselines])
        return ExitCode.OK
    if not baselines:
        out.print("no baselines (set one with `hilbench baseline set RUN`)")
    for b in baselines:
        out.print(f"{b.name}: run {b.run_id} (set {b.set_at})")
    return ExitCode.OK

"""`hilbench results prune [--dry-run] [--json]`: apply the raw-row retention (docs/results.md) now."""

from __future__ import annotations

import argparse
from dataclasses import replace

from bench.commands import FLEET_HELP, add_results_option, fleet_of, results_at
from bench.commands.values import int_in
from bench.core.console import emit_json, out
from bench.store.results import open_store
from bench.store.retention import prune


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `results` command group."""
    results = sub.add_parser("results", help="the results store: retention of raw rows")
    rsub = results.add_subparsers(dest="results_command", required=True)
    p = rsub.add_parser(
        "prune", help="delete raw frame/input rows older than the fleet's [results] retention, then VACUUM"
    )
    p.add_argument("--fleet", metavar="FILE", help=f"whose [results] and [bench] results apply: {FLEET_HELP}")
    add_results_option(p)
    p.add_argument("--keep-raw-days", type=int_in(0), metavar="N", help="override the fleet's keep_raw_days")
    p.add_argument("--keep-raw-runs", type=int_in(0), metavar="N", help="override the fleet's keep_raw_runs")
    p.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_prune)


def cmd_prune(args: argparse.Namespace) -> int:
    """Prune (or count, with --dry-run) and print sizes and rows removed; exit 0."""
    fleet = fleet_of(args)
    policy = fleet.retention
    if args.keep_raw_days is not None:
        policy = replace(policy, keep_raw_days=args.keep_raw_days)
    if args.keep_raw_runs is not None:
        policy = replace(policy, keep_raw_runs=args.keep_raw_runs)
    with open_store(results_at(args, fleet)) as store:
        result = prune(store, policy, dry_run=args.dry_run)
    if args.json:
        emit_json(result.to_json())
    else:
        out.print(result.line(), highlight=False)
    return 0

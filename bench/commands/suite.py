"""`hilbench suite`: the shipped device suite (hil/) with pytest against a fleet, from a checkout or an install."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys

from bench.commands import FLEET_HELP, add_output_dir
from bench.config.fleet import BUNDLED, find_fleet
from bench.core.console import note
from bench.core.errors import ExitCode
from bench.core.paths import HIL_DIR
from bench.core.stopping import exit_code

# pytest's exit status -> the bench's: tests failed 1, interrupted 128+SIGINT, internal error 3, usage error and
# no test collected 2
PYTEST_CODES = {0: ExitCode.OK, 1: ExitCode.FAILED, 2: exit_code(signal.SIGINT), 3: ExitCode.UNREACHABLE,
                4: ExitCode.USAGE, 5: ExitCode.USAGE}  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `suite` command."""
    p = sub.add_parser(
        "suite",
        help="run the device suite (hil/) on the fleet's devices with pytest",
        description=f"pytest {HIL_DIR} with the bench's plugin; arguments after -- go to pytest (e.g. -- -k agent)",
    )
    p.add_argument("--fleet", metavar="FILE", help=FLEET_HELP)
    p.add_argument("--device", action="append", default=[], metavar="NAME", help="only this device")
    p.add_argument("--kind", action="append", default=[], metavar="KIND", help="only devices of this kind")
    add_output_dir(p)
    p.add_argument("--metrics", metavar="FILE", help="OpenMetrics text of the tests' measurements (record_measurement)")
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="more pytest arguments")
    p.set_defaults(func=cmd_suite)


def suite_argv(args: argparse.Namespace) -> list[str]:
    """The pytest command line of `args`."""
    fleet, origin = find_fleet(args.fleet)
    if origin == BUNDLED:
        note(f"using the bundled virtual fleet ({fleet})")
    argv = [sys.executable, "-m", "pytest", str(HIL_DIR), "--fleet", str(fleet), "--output-dir", str(args.output_dir)]
    argv += [f"--device={d}" for d in args.device] + [f"--kind={k}" for k in args.kind]
    argv += [f"--metrics={args.metrics}"] if args.metrics else []
    return [*argv, "-p", "no:cacheprovider", f"--rootdir={HIL_DIR}", *args.pytest_args]


def cmd_suite(args: argparse.Namespace) -> int:
    """Run pytest over the device suite; its exit status in the bench's codes."""
    return int(PYTEST_CODES.get(subprocess.call(suite_argv(args)), ExitCode.FAILED))

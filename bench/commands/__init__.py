"""CLI command groups. Shared option helpers live here."""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.ci.files import CiFiles
from bench.commands.values import seconds
from bench.config.fleet import BUNDLED, FLEET_ENV, LOCAL_FLEET, Device, Fleet, find_fleet, load_fleet, one_board_fleet
from bench.core.console import err, note
from bench.core.errors import ConfigError
from bench.core.leases import LeaseSet
from bench.core.paths import DEFAULT_STORE, OUTPUT_DIR
from bench.lab.doctor import require_pyserial

DEFAULT_LEASE_WAIT_S = 60.0
log = logging.getLogger(__name__)
FLEET_HELP = f"fleet file (default: ${FLEET_ENV}, else ./{LOCAL_FLEET}, else the bundled virtual fleet)"


def add_fleet_options(parser: argparse.ArgumentParser, *, select: bool = True, results: str | None = None) -> None:
    """--fleet (or, with `select`, --port for one board), --device/--kind/--tag filters, and --json; with
    `results` (what the store is for), --results: the fleet's results store unless given (`results_at`)."""
    parser.add_argument("--fleet", metavar="FILE", help=FLEET_HELP)
    if results is not None:
        add_results_option(parser, what=results)
    if select:
        parser.add_argument("--port", metavar="DEV", help="one ESP32-C6 board on this serial port instead of a fleet")
        parser.add_argument("--device", action="append", default=[], metavar="NAME", help="only this device")
        parser.add_argument("--kind", action="append", default=[], metavar="KIND", help="only devices of this kind")
        parser.add_argument("--tag", action="append", default=[], metavar="TAG", help="only devices with this tag")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def add_results_option(parser: argparse.ArgumentParser, *, what: str = "results store", note: str = "") -> None:
    """--results PATH: the results store a command writes or reads; where it is by default: `results_at`."""
    default = f"the fleet's [bench] results, else {DEFAULT_STORE}"
    parser.add_argument("--results", metavar="PATH", help=f"{what} (default: {default}){note}")


def results_at(args: argparse.Namespace, fleet: Fleet) -> str | Path:
    """The results store of a command on `fleet`: --results, else the fleet's [bench] `results`, else the default."""
    return args.results or fleet.bench.results or DEFAULT_STORE


def selected_devices(args: argparse.Namespace) -> tuple[Fleet, list[Device]]:
    """The fleet (`fleet_of`) and the devices the filters select."""
    fleet = fleet_of(args)
    return fleet, fleet.select(args.device, args.kind, args.tag)


def fleet_of(args: argparse.Namespace) -> Fleet:
    """The fleet a command works on: --port's one board, else `bench.config.fleet.find_fleet`'s file; the bundled
    virtual fleet is said in one line, so a forgotten --fleet does not go unnoticed. Refuses labgrid's fork of
    pyserial (bench.lab.doctor.require_pyserial) before any device is touched."""
    require_pyserial()
    port = getattr(args, "port", None)
    if port is not None:
        if args.fleet is not None:
            raise ConfigError("--port and --fleet: give one", hint="--port DEV is a fleet of one ESP32-C6 board")
        log.info("fleet: one board on %s (--port)", port)
        return one_board_fleet(port)
    path, origin = find_fleet(args.fleet)
    log.info("fleet: %s (from %s)", path, origin)
    if origin != BUNDLED and not path.exists():
        hint = f"unset ${FLEET_ENV} or point it at a fleet file" if origin == FLEET_ENV else (
            "`hilbench fleet discover --write FILE` writes one for the boards plugged in here")  # fmt: skip
        raise ConfigError(f"fleet file {path} (from {origin}) does not exist", file=str(path), hint=hint)
    if origin == BUNDLED:
        note(f"using the bundled virtual fleet ({path}); --fleet FILE, ${FLEET_ENV} or ./{LOCAL_FLEET} name another")
    return load_fleet(path)


class _Deprecated(argparse.Action):
    """An old spelling of an option: still taken, with a note naming the new one."""

    def __init__(self, new: str, **kw) -> None:
        self.new = new
        super().__init__(**kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        note(f"{option_string} is deprecated: use {self.new}")
        setattr(namespace, self.dest, values)


def add_output_dir(parser: argparse.ArgumentParser, *old: str, logs: str | None = None) -> None:
    """--output-dir DIR: where the command's reports and logs go (default OUTPUT_DIR), the one name of that folder
    across commands and the pytest plugin. `old` spellings of it are still taken, with a deprecation note; `logs`
    says what the old --logs DIR meant (that exact log folder), which it still means."""
    parser.add_argument("--output-dir", metavar="DIR", type=Path, default=OUTPUT_DIR,
                        help=f"where reports and logs go (default: {OUTPUT_DIR})")  # fmt: skip
    for spelling in old:
        parser.add_argument(spelling, dest="output_dir", type=Path, metavar="DIR", action=_Deprecated,
                            new="--output-dir", help=argparse.SUPPRESS)  # fmt: skip
    if logs is not None:
        parser.add_argument("--logs", dest="logs", type=Path, default=None, metavar="DIR", action=_Deprecated,
                            new=f"--output-dir (logs go to its {logs})", help=argparse.SUPPRESS)  # fmt: skip


class _AllowDevKey(argparse.Action):
    """--allow-dev-key: real devices may trust and get models signed by the committed development key."""

    def __init__(self, **kw) -> None:
        super().__init__(nargs=0, default=False, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from bench.bundles import (
            trust,  # here: it loads the signing code, which only this option and device commands need
        )

        trust.allow_dev_key()
        setattr(namespace, self.dest, True)


def add_device_options(parser: argparse.ArgumentParser) -> None:
    """Options of commands that touch devices: --lease-wait (how long to wait for a device another bench
    process holds) and --allow-dev-key (bench.bundles.trust)."""
    parser.add_argument(
        "--allow-dev-key", action=_AllowDevKey,
        help="let real devices trust the committed development key (a warning each time; virtual ones may anyway)",
    )  # fmt: skip
    parser.add_argument(
        "--lease-wait", type=seconds, default=DEFAULT_LEASE_WAIT_S, metavar="S",
        help=f"wait up to S s for a device another bench run holds, then exit 3 (default {DEFAULT_LEASE_WAIT_S:g})",
    )  # fmt: skip


def add_device_command(
    sub: argparse._SubParsersAction, name: str, summary: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Subcommand `name` (`summary` in the help), run by `func`, that selects fleet devices and touches them:
    fleet, filter and device options; the caller adds its own options to the parser returned."""
    p = sub.add_parser(name, help=summary)
    add_fleet_options(p)
    add_device_options(p)
    p.set_defaults(func=func)
    return p


@contextlib.contextmanager
def held_devices(devices: list[Device], command: str, wait_s: float) -> Iterator[LeaseSet]:
    """Lease every device for as long as the command runs (exit 3 naming the holder when one stays busy).

    Devices are taken in name order, so two commands wanting overlapping sets never each hold what the other
    waits for. Devices reached through a labgrid place are left to labgrid's place lock (which also keeps
    bench hosts apart); the host serving them (`hilbench lab serve`) leases them locally."""
    with LeaseSet(holder=f"hilbench {command}") as leases:
        for name in sorted({d.name for d in devices if d.lab is None}):
            leases.acquire(name, wait_s, say=lambda line: err.print(line, highlight=False))
        yield leases


def add_ci_options(parser: argparse.ArgumentParser) -> None:
    """--summary-md, --junit, --metrics and --pages-url: the files a CI job or a dashboard reads (bench.ci)."""
    group = parser.add_argument_group("files for CI and dashboards")
    group.add_argument(
        "--summary-md",
        type=Path,
        metavar="FILE",
        help="Markdown summary for a job page or PR comment (also appended to $GITHUB_STEP_SUMMARY)",
    )
    group.add_argument(
        "--junit", type=Path, metavar="FILE", help="JUnit XML: one case per device, session and judged metric"
    )
    group.add_argument(
        "--metrics",
        type=Path,
        metavar="FILE",
        help="OpenMetrics text of the figures (node-exporter textfile collector, push gateway)",
    )
    group.add_argument(
        "--pages-url", metavar="URL", help="where CI publishes the output folder's pages: the summary links there"
    )


def add_verdict_options(parser: argparse.ArgumentParser, *, baseline: str | None = None) -> None:
    """--thresholds FILE, and for a command that judges a run against the stored history, --baseline NAME
    (`baseline`: what it judges against without one)."""
    if baseline is not None:
        parser.add_argument(
            "--baseline",
            metavar="NAME",
            help=f"judge against the runs up to the one baseline NAME pins (default: {baseline})",
        )
    parser.add_argument("--thresholds", metavar="FILE", help="baseline thresholds TOML (default: the bundled one)")


def add_ci_run_options(parser: argparse.ArgumentParser, *old_output: str) -> None:
    """What the commands that replay builds on the fleet for a CI job share (nightly, check, bisect): --speed,
    --output-dir (`old_output`: its old spellings), the device options and the CI files."""
    parser.add_argument("--speed", default="1", metavar="X", help="replay time factor, or 'max'")
    add_output_dir(parser, *old_output)
    add_device_options(parser)
    add_ci_options(parser)


def ci_files(args: argparse.Namespace) -> CiFiles:
    """The CI files `args` ask for, checked writable before the job runs (ConfigError naming the option)."""
    files = CiFiles(args.summary_md, args.junit, args.metrics, args.pages_url)
    files.check()
    return files

"""CLI command groups. Shared option helpers live here."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator

from bench import trust
from bench.commands.values import seconds
from bench.console import err
from bench.fleet import Device, Fleet, load_fleet
from bench.leases import LeaseSet

DEFAULT_LEASE_WAIT_S = 60.0


def add_fleet_options(parser: argparse.ArgumentParser, *, select: bool = True) -> None:
    """--fleet, and (with `select`) --device/--kind/--tag filters, and --json."""
    parser.add_argument("--fleet", metavar="FILE", help="fleet file (default: the bundled virtual fleet)")
    if select:
        parser.add_argument("--device", action="append", default=[], metavar="NAME", help="only this device")
        parser.add_argument("--kind", action="append", default=[], metavar="KIND", help="only devices of this kind")
        parser.add_argument("--tag", action="append", default=[], metavar="TAG", help="only devices with this tag")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def selected_devices(args: argparse.Namespace) -> tuple[Fleet, list[Device]]:
    """The fleet named by --fleet and the devices the filters select."""
    fleet = load_fleet(args.fleet)
    return fleet, fleet.select(args.device, args.kind, args.tag)


class _AllowDevKey(argparse.Action):
    """--allow-dev-key: real devices may trust and get models signed by the committed development key."""

    def __init__(self, **kw) -> None:
        super().__init__(nargs=0, default=False, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        trust.allow_dev_key()
        setattr(namespace, self.dest, True)


def add_device_options(parser: argparse.ArgumentParser) -> None:
    """Options of commands that touch devices: --lease-wait (how long to wait for a device another bench
    process holds) and --allow-dev-key (bench.trust)."""
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

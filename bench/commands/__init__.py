"""CLI command groups. Shared option helpers live here."""

from __future__ import annotations

import argparse

from bench.fleet import Device, Fleet, load_fleet


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

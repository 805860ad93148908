"""`hilbench`: thin command line over the bench library. Parses, calls, prints, sets the exit code."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from rich.markup import escape

from bench import __version__
from bench.console import err
from bench.errors import BenchError, ExitCode

# Each module has register(subparsers) which adds its commands with `func=handler(args) -> int`.
COMMAND_MODULES = [
    "bench.commands.fleet",
    "bench.commands.nightly",
    "bench.commands.report",
    "bench.commands.keys",
    "bench.commands.model",
    "bench.commands.ota",
    "bench.commands.update",
    "bench.commands.session",
    "bench.commands.replay",
    "bench.commands.bisect",
    "bench.commands.linux",
    "bench.commands.image",
    "bench.commands.flash",
    "bench.commands.virtual",
    "bench.commands.lab",
    "bench.commands.power",
    "bench.commands.doctor",
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 2 without a traceback
        self.print_usage(sys.stderr)
        err.print(f"[red]error:[/red] {escape(message)}")
        raise SystemExit(ExitCode.USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The full `hilbench` argument parser."""
    parser = _Parser(prog="hilbench", description="Hardware-in-the-loop bench for on-device NPC inference.")
    parser.add_argument("--version", action="version", version=f"hilbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


def _as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM/SIGHUP (cron, systemd, CI, a closed terminal) do what Ctrl-C does: whatever handles SIGINT right
    now (asyncio.run cancels its main task, so devices are stopped, leases released and the run marked
    interrupted; elsewhere KeyboardInterrupt). A repeated SIGTERM/SIGHUP is ignored while stopping."""
    if _received:  # already stopping: a second SIGTERM must not cut the cleanup short (SIGKILL still does)
        return
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (128 + the signal's number when interrupted)."""
    args = build_parser().parse_args(argv)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _as_interrupt)
    try:
        return int(args.func(args))
    except BenchError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        signum = _received[0] if _received else signal.SIGINT
        err.print(f"interrupted ({signal.Signals(signum).name})")
        return 128 + signum


if __name__ == "__main__":
    raise SystemExit(main())

"""`hilbench`: thin command line over the bench library. Parses, calls, prints, sets the exit code."""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
from typing import NoReturn

from bench import __version__
from bench.errors import BenchError, ConfigError, ExitCode
from bench.stopping import STOP_SIGNALS, Interrupted, exit_code

# Each module has register(subparsers) which adds its commands with `func=handler(args) -> int`.
COMMAND_MODULES = [
    "bench.commands.fleet",
    "bench.commands.nightly",
    "bench.commands.report",
    "bench.commands.results",
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
    def error(self, message: str) -> NoReturn:  # usage errors exit 2 without a traceback (main prints them)
        self.print_usage(sys.stderr)
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    """The full `hilbench` argument parser."""
    parser = _Parser(prog="hilbench", description="Hardware-in-the-loop bench for on-device NPC inference.")
    parser.add_argument("--version", action="version", version=f"hilbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


_received: list[int] = []


def _as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM/SIGHUP (cron, systemd, CI, a closed terminal) do what Ctrl-C does: whatever handles SIGINT right
    now (asyncio.run cancels its main task, so devices are stopped, leases released and the run marked
    interrupted; a server's bench.stopping.StopSignals stops it; elsewhere KeyboardInterrupt). A repeated
    SIGTERM/SIGHUP is ignored while stopping."""
    if _received:  # already stopping: a second SIGTERM must not cut the cleanup short (SIGKILL still does)
        return
    _received.append(signum)
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise Interrupted(signum)
    signal.raise_signal(signal.SIGINT)  # delivered as Ctrl-C is, also to an event loop's own SIGINT handler


def _interrupt_code(exc: BaseException) -> int | None:
    """The signal that stopped the command, when `exc` is how it stopped (None: a real error)."""
    if isinstance(exc, Interrupted):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return _received[0] if _received else signal.SIGINT
    if type(exc).__name__ == "CancelledError" and _received:  # a task cancelled on SIGTERM (bench.lab.acquire)
        return _received[0]
    return None


def _say(text: str, *, error: bool) -> None:
    """One line on stderr, never wrapped (a log keeps it whole): through rich when the commands loaded it
    (colour on a terminal), else plain (an interrupt while modules still import must not import more)."""
    if "bench.console" in sys.modules and "rich.markup" in sys.modules:
        from rich.markup import escape

        from bench.console import err

        err.print(f"[red]error:[/red] {escape(text)}" if error else escape(text), highlight=False, soft_wrap=True)
    else:
        sys.stderr.write(f"error: {text}\n" if error else f"{text}\n")
        sys.stderr.flush()


def _is_damaged_store(exc: BaseException) -> bool:
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError)


def _fail(code: int, message: str, *, as_json: bool, exc: BenchError | None = None) -> int:
    """Say what went wrong (stderr; with --json also one JSON object on stdout) and return `code`."""
    _say(message, error=code < 128)
    if exc is not None and exc.hint:
        _say(f"  hint: {exc.hint}", error=False)
    if as_json:
        detail = {"code": code, "message": exc.message if exc is not None else message}
        for key in ("file", "field", "device", "hint"):
            detail[key] = getattr(exc, key, None)
        sys.stdout.write(json.dumps({"ok": False, "error": detail}) + "\n")
        sys.stdout.flush()
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (128 + the signal's number when interrupted)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv  # until parsed (a usage error answers in JSON too)
    _received.clear()
    for sig in STOP_SIGNALS[1:]:
        signal.signal(sig, _as_interrupt)
    try:
        args = build_parser().parse_args(argv)
        as_json = bool(getattr(args, "json", False))
        return int(args.func(args))
    except BenchError as exc:
        return _fail(int(exc.exit_code), str(exc.message), as_json=as_json, exc=exc)
    except BaseException as exc:
        if _is_damaged_store(exc):  # a results store damaged after it was opened and checked
            message = f"results store: {exc} (the store is damaged; see PRAGMA integrity_check)"
            return _fail(ExitCode.USAGE, message, as_json=as_json)
        signum = _interrupt_code(exc)
        if signum is None:
            raise
        return _fail(exit_code(signum), f"interrupted ({signal.Signals(signum).name})", as_json=as_json)


if __name__ == "__main__":
    raise SystemExit(main())

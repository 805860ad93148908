"""`hilbench`: thin command line over the bench library. Parses, calls, prints, sets the exit code.

Only the module of the command being run is imported (a fast start: `hilbench --version` and `hilbench fleet
list` load no scipy, numpy, aiocoap, labgrid or jinja2); `hilbench --help`, a usage error and shell completion
load them all. Global options (`-v`, `-q`, `--log-file`, `--log-level`) go anywhere; `--fleet`, `--port` and
`--json` go before or after the command."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import NoReturn

from bench import __version__
from bench.core.errors import BenchError, ConfigError, ExitCode
from bench.core.stopping import STOP_SIGNALS, Interrupted, exit_code, stopped_by

# Each command's module has register(subparsers), which adds its commands with `func=handler(args) -> int`.
COMMANDS = {
    "fleet": "bench.commands.fleet",
    "nightly": "bench.commands.nightly",
    "report": "bench.commands.report",
    "baseline": "bench.commands.report",
    "alerts": "bench.commands.alerts",
    "results": "bench.commands.results",
    "keys": "bench.commands.keys",
    "model": "bench.commands.model",
    "ota": "bench.commands.ota",
    "update": "bench.commands.update",
    "session": "bench.commands.session",
    "replay": "bench.commands.replay",
    "bisect": "bench.commands.bisect",
    "check": "bench.commands.check",
    "linux": "bench.commands.linux",
    "image": "bench.commands.image",
    "flash": "bench.commands.flash",
    "virtual": "bench.commands.virtual",
    "lab": "bench.commands.lab",
    "power": "bench.commands.power",
    "energy": "bench.commands.energy",
    "doctor": "bench.commands.doctor",
    "suite": "bench.commands.suite",
    "completion": "bench.commands.completion",
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))
MOVABLE = {"--fleet": True, "--port": True, "--json": False}  # command options also taken before the command
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_ENV = "HILBENCH_LOG"  # a log file, as --log-file
EPILOG = (
    "global options go before or after the command: -v/-vv (more detail on stderr), -q (no notes or progress), "
    f"--log-file FILE (also ${LOG_ENV}) with --log-level {{{','.join(LOG_LEVELS)}}} (default debug); --fleet FILE, "
    "--port DEV and --json may also come before the command"
)


class _Formatter(argparse.HelpFormatter):
    """Help wrapped between words only: never inside a word or an option's name ("rep|lay", "--log-|level")."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line for line in self._split_lines(text, width - len(indent)))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # usage errors exit 2 without a traceback (main prints them)
        self.print_usage(sys.stderr)
        raise ConfigError(message, hint=f"`{self.prog} --help` lists its commands and options")

    def add_subparsers(self, **kwargs):  # "COMMAND" in usage and errors, not the dest's internal name
        kwargs.setdefault("metavar", "COMMAND")
        return super().add_subparsers(**kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `hilbench` argument parser: with `command`, only that command's (what a run needs), else all."""
    parser = _Parser(
        prog="hilbench",
        description="Hardware-in-the-loop bench for on-device NPC inference.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"hilbench {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more detail on stderr (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no notes or progress on stderr")
    parser.add_argument("--log-file", metavar="FILE", help=f"also log to FILE (default: ${LOG_ENV})")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="debug", help="the log file's level")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, title="commands")
    modules = [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


class GlobalOptions(argparse.Namespace):
    """What `split_globals` took out of the command line."""

    verbose: int = 0
    quiet: bool = False
    log_file: str | None = None
    log_level: str = "debug"


def _value(argv: list[str], i: int, option: str) -> tuple[str, int]:
    """The value of `option` at argv[i] (`--opt=V` or `--opt V`) and the index after it."""
    token = argv[i]
    if token.startswith(option + "="):
        return token[len(option) + 1 :], i + 1
    if i + 1 >= len(argv):
        raise ConfigError(f"{option}: expected a value", hint="`hilbench --help` lists the global options")
    return argv[i + 1], i + 2


def split_globals(argv: list[str]) -> tuple[list[str], GlobalOptions, str | None]:
    """The command line without the global options, those options, and the command's name.

    -v/-q/--log-file/--log-level are taken from anywhere (up to `--`); --fleet, --port and --json given before
    the command are moved after it, where the command's parser reads them."""
    opts, rest, moved, command = GlobalOptions(), [], [], None
    i = 0
    while i < len(argv):
        token = argv[i]
        name = token.split("=", 1)[0]
        if token == "--":
            rest += argv[i:]
            break
        if re.fullmatch(r"-v+", token) or token == "--verbose":
            opts.verbose += 1 if token == "--verbose" else len(token) - 1
            i += 1
        elif token in ("-q", "--quiet"):
            opts.quiet, i = True, i + 1
        elif name in ("--log-file", "--log-level"):
            value, i = _value(argv, i, name)
            setattr(opts, name[2:].replace("-", "_"), value)
        elif command is None and name in MOVABLE:
            if MOVABLE[name]:
                value, i = _value(argv, i, name)
                moved += [name, value]
            else:
                moved.append(token)
                i += 1
        else:
            if command is None and not token.startswith("-"):
                command = token
            rest.append(token)
            i += 1
    if opts.log_level not in LOG_LEVELS:
        raise ConfigError(f"--log-level {opts.log_level!r}: not one of {', '.join(LOG_LEVELS)}")
    if "--" in rest:
        cut = rest.index("--")
        return rest[:cut] + moved + rest[cut:], opts, command
    return rest + moved, opts, command


def _setup_logging(opts: GlobalOptions) -> None:
    """Log records to stderr at WARNING (-v INFO, -vv DEBUG, -q ERROR) and, with --log-file or $HILBENCH_LOG,
    to that file at --log-level."""
    import logging

    root = logging.getLogger()
    terminal = logging.ERROR if opts.quiet else max(logging.DEBUG, logging.WARNING - 10 * opts.verbose)
    stream = logging.StreamHandler(sys.stderr)
    stream.setLevel(terminal)
    stream.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(stream)
    levels = [terminal]
    log_file = opts.log_file or os.environ.get(LOG_ENV)
    if log_file:
        try:
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--log-file {log_file}: cannot write: {exc.strerror}", file=log_file) from None
        level = getattr(logging, opts.log_level.upper())
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        levels.append(level)
    root.setLevel(min(levels))


def _as_interrupt(signum: int, frame: object) -> None:
    """SIGTERM/SIGHUP (cron, systemd, CI, a closed terminal) do what Ctrl-C does: whatever handles SIGINT right
    now (a server's bench.core.stopping.StopSignals stops it; elsewhere KeyboardInterrupt). While a command's
    event loop runs (bench.core.stopping.run_stoppable), the loop's own handler cancels its main task instead.
    A repeated SIGTERM/SIGHUP is ignored while stopping."""
    if stopped_by:  # already stopping: a second SIGTERM must not cut the cleanup short (SIGKILL still does)
        return
    stopped_by.append(signum)
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise Interrupted(signum)
    signal.raise_signal(signal.SIGINT)  # delivered as Ctrl-C is, also to an event loop's own SIGINT handler


def _interrupt_code(exc: BaseException) -> int | None:
    """The signal that stopped the command, when `exc` is how it stopped (None: a real error)."""
    if isinstance(exc, Interrupted):
        return exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return stopped_by[0] if stopped_by else signal.SIGINT
    if type(exc).__name__ == "CancelledError" and stopped_by:  # the main task cancelled on SIGTERM (run_stoppable)
        return stopped_by[0]
    return None


def _say(text: str, *, error: bool) -> None:
    """One line on stderr, never wrapped (a log keeps it whole): through rich when the commands loaded it
    (colour on a terminal), else plain (an interrupt while modules still import must not import more). Errors
    are said under -q too."""
    console = sys.modules.get("bench.core.console")
    if console is not None and "rich.markup" in sys.modules and not console.err.quiet:
        from rich.markup import escape

        console.err.print(f"[red]error:[/red] {escape(text)}" if error else escape(text), highlight=False,
                          soft_wrap=True)  # fmt: skip
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


def _complete() -> None:
    """Shell completion (argcomplete's protocol: the shell runs `hilbench` with $_ARGCOMPLETE set)."""
    import argcomplete

    argcomplete.autocomplete(build_parser())


def _check_output_folders(args: argparse.Namespace) -> None:
    """Refuse (exit 2, before any work) an output folder another user could swap (bench.core.folders)."""
    from bench.core.folders import check_chain

    for dest, option in (("output_dir", "--output-dir"), ("logs", "--logs")):
        folder = getattr(args, dest, None)
        if isinstance(folder, Path):
            check_chain(folder, f"{option} folder")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (128 + the signal's number when interrupted)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv  # until parsed (a usage error answers in JSON too)
    stopped_by.clear()
    for sig in STOP_SIGNALS[1:]:
        signal.signal(sig, _as_interrupt)
    try:
        if "_ARGCOMPLETE" in os.environ:
            _complete()
        argv, opts, command = split_globals(argv)
        if command is None and argv == ["--version"]:  # without loading every command for the full parser
            sys.stdout.write(f"hilbench {__version__}\n")
            return ExitCode.OK
        args = build_parser(command).parse_args(argv)
        _setup_logging(opts)
        if opts.quiet:
            from bench.core.console import set_quiet

            set_quiet(True)
        as_json = bool(getattr(args, "json", False))
        _check_output_folders(args)
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

"""`hilbench session info|synth`: inspect recorded sessions and generate the fixture ones."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from bench.commands.values import float_in, int_in
from bench.core.console import compact_table, emit_json, out
from bench.core.errors import ConfigError, ExitCode
from bench.core.paths import SESSIONS_DIR
from bench.replay.info import session_info
from bench.replay.recording import read_session, write_session
from bench.replay.synth import SCENARIOS, synth_session


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `session` command group."""
    session = sub.add_parser("session", help="recorded multimodal sessions (MCAP)")
    ssub = session.add_subparsers(dest="session_command", required=True)
    p = ssub.add_parser("info", help="channels, rates, duration and gaps of a session file")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_info)
    p = ssub.add_parser("synth", help="generate sessions with the deterministic generator")
    p.add_argument("--scenario", action="append", choices=list(SCENARIOS), default=[], help="scenario (default: all)")
    p.add_argument(
        "--seed", type=int_in(0, 2**32 - 1), default=0, help="generator seed (default 0: the committed fixtures)"
    )
    p.add_argument(
        "--duration",
        type=float_in(0.0, 86400.0, low_open=True),
        default=None,
        metavar="S",
        help="seconds (default: the scenario's)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("sessions"), metavar="DIR",
        help=f"output directory (default: ./sessions; the committed fixtures are rewritten with --out {SESSIONS_DIR})",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=cmd_synth)


def cmd_info(args: argparse.Namespace) -> int:
    """Summarise one session file."""
    info = session_info(read_session(args.file, values=False))  # times and channels: no payload held
    if args.json:
        emit_json(info.to_dict())
        return ExitCode.OK
    head = Text(info.path, style="bold")  # the file's own text: no markup, no highlighting (quadratic in rich)
    head.append(f"  session {info.session_id}  scenario {info.scenario or '-'}  ")
    head.append(f"{info.duration_s:.2f} s  {info.messages} messages")
    out.print(head, highlight=False)
    table = compact_table(caption="Hz: nominal, measured; max Δt: longest interval")
    for col in ("channel", "msgs", "Hz", "real Hz", "first s", "last s", "max Δt ms", "gaps"):
        table.add_column(col, justify="left" if col == "channel" else "right", no_wrap=col != "gaps")
    for ch in info.channels:
        gaps = ", ".join(f"{g.length_ms:.0f} ms @ {g.start_s:.2f} s" for g in ch.gaps) or "none"
        nominal = f"{ch.nominal_hz:g}" if ch.nominal_hz else "events"
        table.add_row(
            ch.name, str(ch.messages), nominal, f"{ch.measured_hz:.2f}", f"{ch.first_s:.3f}", f"{ch.last_s:.3f}",
            f"{ch.max_interval_ms:.1f}", gaps,
        )  # fmt: skip
    out.print(table)
    return ExitCode.OK


def cmd_synth(args: argparse.Namespace) -> int:
    """Generate sessions into --out as <scenario>.mcap (or <scenario>-<seed>.mcap for other seeds)."""
    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out}: not a directory")
    written = []
    for name in args.scenario or list(SCENARIOS):
        session = synth_session(name, args.seed, args.duration)
        suffix = "" if args.seed == 0 and args.duration is None else f"-{args.seed}"
        path = args.out / f"{name}{suffix}.mcap"
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            write_session(path, session)
        except OSError as exc:
            raise ConfigError(f"--out {args.out}: cannot write {path.name}: {exc.strerror}") from None
        written.append(
            {"scenario": name, "path": str(path), "bytes": path.stat().st_size, "seconds": session.duration_s}
        )
    if args.json:
        emit_json({"sessions": written})
    else:
        for w in written:
            out.print(f"wrote {w['path']} ({w['scenario']}, {w['seconds']:.1f} s, {w['bytes']} bytes)")
    return ExitCode.OK

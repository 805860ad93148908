"""`hilbench alerts list / show ID / ack ID / invalid ID / downstream ID / fix ID`: the morning triage of the
nightly's alerts (docs/alerts.md), in the results store the nightly writes."""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import shlex
import textwrap
from collections.abc import Callable

from bench.alerts import table
from bench.alerts.model import DOWNSTREAM, INVALID, OPEN, STATES, UNTRIAGED, Alert, AlertMetric
from bench.alerts.triage import acknowledge, downstream, fix, invalidate
from bench.commands import add_results_option, results_at
from bench.commands.report import run_id_arg
from bench.config.fleet import Fleet, find_fleet, load_fleet
from bench.core.console import emit_json, out, plain, shown
from bench.core.errors import ConfigError
from bench.core.units import figure
from bench.results.thresholds import load_thresholds
from bench.store.results import ResultStore, open_store

WIDTH = 79  # what a line of `show` fits (80 columns)
COMMAND_END = "\0"  # marks a line of a command, which `show` does not wrap


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `alerts` command group."""
    group = sub.add_parser("alerts", help="the nightly's alerts: list, show and triage them")
    asub = group.add_subparsers(dest="alerts_command", required=True)
    p = asub.add_parser("list", help="alerts not fixed (or --state S, --all), newest first, one line each")
    p.add_argument("--state", action="append", choices=STATES, default=[], help="only alerts in this state")
    p.add_argument("--all", action="store_true", help="alerts in every state, fixed ones included")
    p.add_argument("--device", metavar="NAME", help="only this device's alerts")
    _common(p, thresholds=True)
    p.set_defaults(func=cmd_list)
    one = functools.partial(_one_alert, asub)
    one("show", "one alert: its evidence, state and history", cmd_show)
    ack = one("ack", "acknowledge: someone owns it (it no longer fails the night)", cmd_ack,
              owner=("NAME", "who owns it"), note=("TEXT", "what is known"))  # fmt: skip
    ack.add_argument("--link", default="", metavar="URL", help="a bug or pull request")
    one("invalid", "not the product's fault (e.g. the lab's USB hub)", cmd_invalid,
        reason=("TEXT", "why it is invalid"))  # fmt: skip
    one("downstream", "caused by another alert (e.g. the same model on another device)", cmd_downstream,
        of=("N", "the alert that causes it"))  # fmt: skip
    one("fix", "fixed by run R (the bench also fixes alerts by itself)", cmd_fix,
        run=("R", "the run that shows it fixed"))  # fmt: skip


def _one_alert(
    asub: argparse._SubParsersAction, name: str, summary: str, func: Callable, **required: tuple[str, str]
) -> argparse.ArgumentParser:
    """Subcommand `name` on one alert (its number), with the `required` options (--flag: (METAVAR, help)) and the
    common ones."""
    p = asub.add_parser(name, help=summary)
    p.add_argument("id", help="the alert's number")
    for flag, (metavar, text) in required.items():
        p.add_argument(f"--{flag}", required=True, metavar=metavar, help=text)
    _common(p)
    p.set_defaults(func=func)
    return p


def _common(p: argparse.ArgumentParser, *, thresholds: bool = False) -> None:
    add_results_option(p)
    p.add_argument("--fleet", metavar="FILE", help="whose [bench] results is the store (default: as the nightly)")
    if thresholds:
        p.add_argument("--thresholds", metavar="FILE", help="its [alerts] untriaged_days flags overdue alerts")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def _store(args: argparse.Namespace) -> ResultStore:
    """The store the nightly writes: --results, else the fleet's [bench] results, else the default."""
    if args.results:
        return open_store(args.results)
    path, _ = find_fleet(args.fleet)
    named = args.fleet is not None
    fleet = load_fleet(path) if named or path.exists() else Fleet(path, [])  # a named fleet must load
    return open_store(results_at(args, fleet))


def _id(value: str, what: str = "alert") -> int:
    try:
        number = int(value.lstrip("#"))
    except ValueError:
        raise ConfigError(f"{what} {value!r}: alert ids are numbers", hint="see `hilbench alerts list`") from None
    if not 0 < number < 2**63:
        raise ConfigError(f"{what} {value}: no such alert", hint="see `hilbench alerts list`")
    return number


def cmd_list(args: argparse.Namespace) -> int:
    """The alerts, one line each (80 columns), overdue untriaged ones flagged."""
    rules = load_thresholds(args.thresholds).alerts
    states = None if args.all else (args.state or list(OPEN))
    with _store(args) as store:
        alerts = table.select(store, states=states, device=args.device)
    now = dt.datetime.now(dt.UTC)
    if args.json:
        emit_json([{**a.to_json(now), "overdue": a.overdue(rules.untriaged_days, now)} for a in alerts])
        return 0
    if not alerts:
        out.print("no alerts" + ("" if args.all else " open (--all shows fixed ones)"), highlight=False)
        return 0
    for line in _list_lines(alerts, rules.untriaged_days, now):
        out.print(line, highlight=False, soft_wrap=True)
    late = [a for a in alerts if a.overdue(rules.untriaged_days, now)]
    if late:
        ids = ", ".join(f"#{a.id}" for a in late)
        out.print(f"! untriaged for more than {rules.untriaged_days:g} days: {ids}", highlight=False)
    return 0


def _list_lines(alerts: list[Alert], untriaged_days: float, now: dt.datetime) -> list[str]:
    """`alerts list` as rich markup: a header, a rule and one line per alert that fits WIDTH columns, its metrics
    shortened to the room left (an overdue state in red, ending in `!`)."""
    rows = []
    for a in alerts:
        late = a.overdue(untriaged_days, now)
        rows.append((str(a.id), shown(a.device), a, a.state + ("!" if late else ""), f"{a.age_days(now):.1f} d",
                     shown(_who(a)), late))  # fmt: skip
    head = ("#", "device", "metrics", "state", "age", "who / why")
    ids, devices, states, ages = (max(len(head[i]), *(len(r[i]) for r in rows)) for i in (0, 1, 3, 4))
    devices = min(devices, 12)
    room = WIDTH - ids - devices - states - ages - 2 * 5
    who = min(max(len(head[5]), *(len(r[5]) for r in rows)), 20, max(4, room - 24))
    metrics = room - who
    lines = [_row(head, (ids, devices, metrics, states, ages, who)), "─" * WIDTH]
    for id_, device, alert, state, age, why, late in rows:
        cells = (id_, device, shown(alert.what(metrics)), state, age, why)
        line = _row(cells, (ids, devices, metrics, states, ages, who))
        lines.append(line.replace(f" {plain(state)} ", f" [red]{plain(state)}[/red] ", 1) if late else line)
    return lines


def _row(cells: tuple[str, ...], widths: tuple[int, ...]) -> str:
    """One line of `list` (rich markup): each cell cut to its width ("…"), the id and age right-aligned."""
    parts = []
    for i, (text, width) in enumerate(zip(cells, widths, strict=True)):
        cut = text if len(text) <= width else text[: width - 1] + "…"
        parts.append(plain(cut.rjust(width) if i in (0, 4) else cut.ljust(width)))
    return "  ".join(parts).rstrip()


def _who(a: Alert) -> str:
    if a.state == DOWNSTREAM:
        return f"of #{a.of_alert}"
    if a.state == INVALID:
        return a.reason
    if a.state == UNTRIAGED and a.suggested_of:
        return f"same change as #{a.suggested_of}?"
    return a.owner


def cmd_show(args: argparse.Namespace) -> int:
    """One alert with its evidence and history."""
    with _store(args) as store:
        alert = table.get(store, _id(args.id))
        history = store.alerts.events(alert.id)
    if args.json:
        emit_json({**alert.to_json(), "events": [e.to_json() for e in history]})
        return 0
    count = f"{len(alert.metrics)} metric{'s' if len(alert.metrics) != 1 else ''}"
    lines = [
        f"alert #{alert.id}: {alert.device}, {count} ({alert.kind}), session {', '.join(alert.sessions)}",
        f"  state {alert.state} since {alert.state_since[:16]}" + _state_detail(alert),
        f"  first night run {alert.first_run}, newest bad night run {alert.last_run}",
        "  metrics:",
        *(_metric_line(m, len(alert.sessions) > 1) for m in alert.metrics),
    ]
    lines += [f"  change: {c}" for c in alert.change] or ["  change: none in the fingerprint"]
    lines += [f"  {alert.cause}"] if alert.cause else []
    lines += ["  find the first bad build:", *command_lines(alert.bisect, "    ")] if alert.bisect else []
    if alert.suggested_of and alert.of_alert is None:
        lines.append(f"  same change as alert #{alert.suggested_of}: hilbench alerts downstream {alert.id} "
                     f"--of {alert.suggested_of}")  # fmt: skip
    lines.append("  history:")
    lines += [f"    {e.at[:16]} {e.event} ({e.actor}): {e.detail}" for e in history]
    for line in lines:  # control characters shown before wrapping (a stored note sends none to the terminal)
        parts = [shown(line.removesuffix(COMMAND_END))] if line.endswith(COMMAND_END) else textwrap.wrap(
            shown(line), WIDTH, subsequent_indent=" " * 6, break_on_hyphens=False)  # fmt: skip
        for part in parts:
            out.print(part, highlight=False, markup=False, soft_wrap=True)
    return 0


def command_lines(command: str, indent: str) -> list[str]:
    """A shell command in lines of at most WIDTH columns (an option stays with its value), continued with a
    backslash; each line ends in COMMAND_END, which tells `show` not to wrap it again."""
    chunks: list[str] = []
    for word in (shlex.quote(w) for w in shlex.split(command)):
        if chunks and chunks[-1].startswith("-") and " " not in chunks[-1] and not word.startswith("-"):
            chunks[-1] += " " + word
        else:
            chunks.append(word)
    lines, line = [], indent
    for chunk in chunks:
        if line.strip() and len(line) + len(chunk) + 3 > WIDTH:
            lines.append(line + " \\")
            line = indent + "  "
        line += ("" if not line.strip() else " ") + chunk
    return [part + COMMAND_END for part in [*lines, line]]


def _state_detail(a: Alert) -> str:
    if a.owner:
        return f"; owner {a.owner}: {a.note}" + (f" ({a.link})" if a.link else "")
    if a.state == INVALID:
        return f": {a.reason}"
    if a.state == DOWNSTREAM:
        return f": of alert #{a.of_alert}"
    return f" by run {a.fixed_run}" if a.fixed_run else ""


def _metric_line(m: AlertMetric, sessions: bool) -> str:
    """ "    inference P50: +41.0% (p 0.0003): 1.20 ms -> 1.69 ms; regression, runs 7 to 9" and how it recovers."""
    where = f"{m.session} " if sessions else ""
    line = f"    {where}{m.title}: {m.effect_text()}" + _baseline(m)
    if (drift := m.drift) is not None:
        line += f"; {m.effect_label()} ({drift['nights']} nights)"
    line += f"; {m.kind}, runs {m.first_run} to {m.last_run}"
    if m.recovered_run is not None:
        return line + f"; recovered by run {m.recovered_run}"
    return line + (f"; {m.good_nights} good night{'s' if m.good_nights != 1 else ''}" if m.good_nights else "")


def _baseline(m: AlertMetric) -> str:
    base, value, unit = m.data.get("baseline_value"), m.data.get("value"), m.data.get("unit", "")
    if base is None or value is None:
        return ""
    return f": {figure(base, unit)} -> {figure(value, unit)}"


def _changed(args: argparse.Namespace, change) -> int:
    with _store(args) as store:
        alert = change(store)
    if args.json:
        emit_json(alert.to_json())
    else:
        out.print(shown(f"alert #{alert.id}: {alert.state}" + _state_detail(alert)), highlight=False, markup=False)
    return 0


def cmd_ack(args: argparse.Namespace) -> int:
    """Acknowledge an alert."""
    return _changed(args, lambda s: acknowledge(s, _id(args.id), args.owner, args.note, args.link))


def cmd_invalid(args: argparse.Namespace) -> int:
    """Mark an alert invalid."""
    return _changed(args, lambda s: invalidate(s, _id(args.id), args.reason))


def cmd_downstream(args: argparse.Namespace) -> int:
    """Mark an alert downstream of another."""
    return _changed(args, lambda s: downstream(s, _id(args.id), _id(args.of, "--of")))


def cmd_fix(args: argparse.Namespace) -> int:
    """Mark an alert fixed by a run."""
    run = run_id_arg(args.run, "--run") or 0
    return _changed(args, lambda s: fix(s, _id(args.id), run))

"""Write reports to disk: one self-contained HTML (+ JSON) per run, `latest.html` and `index.html`.

The HTML has inline CSS and inline SVG plots only: no scripts, no network.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from bench.alerts.model import FIXED, Alert
from bench.core.folders import real_folder, write_file
from bench.core.units import UNIT_SYMBOLS, readable
from bench.measure.replay_timing import SEED_ALIGNMENT_MS
from bench.report import svg
from bench.report.build import Report
from bench.report.measures import NOUNS, count_text, measure_rows
from bench.report.nights import Cell, SessionGrid
from bench.results.judge import ICOUNT
from bench.results.verdict import INCONCLUSIVE, NOT_REPRODUCED, REGRESSION
from bench.store.runs import UPDATE_RUN_KIND

_HERE = Path(__file__).parent
_ENV = Environment(loader=PackageLoader("bench.report", "templates"), autoescape=select_autoescape(["j2", "html"]))
_ENV.globals["update_kind"] = UPDATE_RUN_KIND


def num(value: float | None, unit: str, digits: int | None = None) -> str:
    """A number with its unit (about 3 significant digits unless `digits`), or an em dash when there is none.
    Times and sizes move to the unit that reads best: sub-millisecond values in µs (never "0.0 ms"), thousands of
    µs in ms, bytes in kB/MB."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if value == 0:  # "0.000 ms" reads as a rounded measurement; zero is zero
        return f"0 {UNIT_SYMBOLS.get(unit, unit)}"
    value, unit = readable(float(value), unit)
    if digits is None:
        digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2 if abs(value) >= 0.1 else 3
    return f"{value:,.{digits}f} {UNIT_SYMBOLS.get(unit, unit)}"


def pct(value: float | None) -> str:
    """A signed percent change."""
    return "—" if value is None else f"{value:+.1f} %"


def pval(value: float | None) -> str:
    """A p-value, short."""
    return "—" if value is None else ("< 0.0001" if value < 1e-4 else f"{value:.4f}")


def ptext(value: float | None) -> str:
    """ "p = 0.0123" or "p < 0.0001"."""
    text = pval(value)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _mark(device: dict, metric: str) -> Markup:
    """The class attribute for a summary cell: red/green only when that metric's verdict says so."""
    for v in device["verdicts"]:
        if v["metric"] == metric and v["status"] in ("regression", "improved"):
            return Markup(' class="bad"' if v["status"] == "regression" else ' class="good"')
    return Markup("")


def _verdict_counts(device: dict) -> str:
    counts: dict[str, int] = {}
    for v in device["verdicts"]:
        counts[v["status"]] = counts.get(v["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no baseline"


# the overview's columns: (short header, measures row key)
OVERVIEW = (
    ("latency P50", "latency_p50"), ("latency P99", "latency_p99"), ("FPS", "fps"), ("1% low", "low_1pct_fps"),
    ("jitter (std)", "jitter_std"), ("deadline misses", "deadline_misses"),
)  # fmt: skip


def _overview_rows(device: dict) -> list[dict]:
    rows = {r["key"]: r for r in measure_rows(device)}
    return [rows[key] for _, key in OVERVIEW]


def _caption(svg: str) -> Markup:
    """A plot's title (its SVG's aria-label, already escaped) shown above it: two plots with the same y axis
    (FPS over time, FPS over the last runs) must not need a hover to tell apart."""
    found = re.search(r'aria-label="([^"]*)"', svg)
    return Markup(found.group(1) if found else "")


def render_html(report: Report) -> str:
    """The report as one self-contained HTML document."""
    template = _ENV.get_template("report.html.j2")
    return template.render(
        data=report.data, run=report.data["run"], plots=report.plots, css=_css(),
        num=num, pct=pct, pval=pval, ptext=ptext, mark=_mark, verdict_counts=_verdict_counts,
        measure_rows=measure_rows, overview_rows=_overview_rows, overview_headers=[h for h, _ in OVERVIEW],
        caption=_caption, count_text=count_text, noun=lambda metric: NOUNS.get(metric, "observations"),
        icount_reason=ICOUNT, seed_alignment_ms=SEED_ALIGNMENT_MS,
    )  # fmt: skip


def run_file_stem(run_id: str) -> str:
    """A file name for a run id (ids may contain ':' or '/')."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


def write_report(
    report: Report, reports_dir: Path, *, html: str | None = None, grids: list[SessionGrid] | None = None
) -> Path:
    """Write runs/<run>.html and .json, refresh latest.html (if this is the newest session
    run: the update-and-faults run comes after the sessions but is not what "latest report" means) and index.html
    (with the history `grids` when given)."""
    runs_dir = real_folder(reports_dir / "runs", "report folder")
    stem = run_file_stem(report.run_id)
    page = runs_dir / f"{stem}.html"
    _atomic_write(page, html if html is not None else render_html(report))
    _atomic_write(runs_dir / f"{stem}.json", json.dumps(report.data, indent=1, default=str))
    index = load_index(reports_dir)
    sessions = [e for e in index if e["run"]["label"] != UPDATE_RUN_KIND]  # latest.html is a session's run
    if (sessions or index) and (sessions or index)[0]["run"]["run_id"] == report.run_id:
        _atomic_write(reports_dir / "latest.html", _relink_for_top_level(page.read_text(encoding="utf-8")))
    write_index(reports_dir, index, grids)
    return page


def write_comparison(report: Report, reports_dir: Path, against: str) -> Path:
    """Write compare/<run>-vs-<other>.html and .json; the run's own page, latest.html and the index stay as they are."""
    compare_dir = real_folder(reports_dir / "compare", "report folder")
    stem = f"{run_file_stem(report.run_id)}-vs-{run_file_stem(against)}"
    page = compare_dir / f"{stem}.html"
    _atomic_write(page, render_html(report))
    _atomic_write(compare_dir / f"{stem}.json", json.dumps(report.data, indent=1, default=str))
    return page


def load_index(reports_dir: Path) -> list[dict]:
    """The run summaries of every written report, newest first."""
    entries = []
    for file in (reports_dir / "runs").glob("*.json"):
        data = json.loads(file.read_text(encoding="utf-8"))
        if "run" not in data:
            continue
        entries.append(
            {
                "run": data["run"],
                "baseline": data["baseline"],
                "outcome": data["outcome"],
                "devices": [d["name"] for d in data["devices"]],
                "file": file.with_suffix(".html").name,
            }
        )
    entries.sort(key=lambda e: (e["run"]["started_at"], e["run"]["run_id"]), reverse=True)
    return entries


def write_index(reports_dir: Path, index: list[dict] | None = None, grids: list[SessionGrid] | None = None) -> Path:
    """(Re)write reports/index.html: the history grids (per session, device x judged metric over the last nights),
    then every written report, newest first (from their JSON files)."""
    entries = load_index(reports_dir) if index is None else index
    path = reports_dir / "index.html"
    views = [_grid_view(g) for g in grids or []]
    _atomic_write(path, _ENV.get_template("index.html.j2").render(runs=entries, grids=views, css=_css()))
    return path


def _grid_view(grid: SessionGrid) -> dict:
    """A session's grid as the index template shows it: rows of devices, a cell per judged metric."""
    rows = []
    for device in grid.devices:
        cells = []
        for rule in grid.rules:
            cell = grid.cells.get((device, rule.name))
            cells.append(_cell_view(cell, grid) if cell else {"svg": "", "text": "no figure", "na": ""})
        rows.append({"device": device, "cells": cells})
    first, last = (grid.nights[0][1], grid.nights[-1][1]) if grid.nights else ("", "")
    return {"session": grid.session or "(no session)", "rules": grid.rules, "rows": rows, "nights": len(grid.nights),
            "first": first[:10], "last": last[:10], "alerts": [_alert_view(a, grid) for a in grid.alerts],
            "untriaged_days": f"{grid.untriaged_days:g}"}  # fmt: skip


_MARKS = {REGRESSION: "regression", NOT_REPRODUCED: "not reproduced", INCONCLUSIVE: "inconclusive"}


def _cell_view(cell: Cell, grid: SessionGrid) -> dict:
    if cell.not_applicable:
        return {"svg": "", "text": "n/a", "na": cell.not_applicable}
    index = {run_id: i for i, (run_id, _) in enumerate(grid.nights)}
    points = []
    for p in cell.points:
        mark = "drift" if p.status == REGRESSION and p.drift_since is not None else _MARKS.get(p.status, "")
        why = f" · {p.reason.split(';')[0]}" if mark else ""
        title = f"run {p.run_id} · {p.started_at[:16]} · {num(p.value, cell.unit)}{why}"
        points.append(svg.SparkPoint(p.value, f"runs/{run_file_stem(str(p.run_id))}.html", title, mark))
    starts = {}
    for p in cell.drifts:
        at = index.get(p.drift_since, 0)  # a drift that began before the shown nights starts at the left edge
        starts[at] = f"drift since run {p.drift_since}: {p.reason.split(';')[0]}"
    failures = [(index[r], f"run {r}: {cell.device} {why}") for r, why in cell.failures.items() if r in index]
    ticks = [(index[r], f"run {r}: " + "; ".join(what)) for r, what in cell.changes.items() if r in index]
    latest = next((p for p in reversed(cell.points) if p.value is not None), None)
    label = f"{cell.device} {cell.rule.title} over the last {len(grid.nights)} nights"
    spark = svg.spark(points, label=label, change_points=sorted(starts.items()), failures=failures, ticks=ticks,
                      slots=len(grid.nights))  # fmt: skip
    shown = [p.value for p in cell.points if p.value is not None]
    spread = f" ({num(min(shown), cell.unit)} to {num(max(shown), cell.unit)})" if len(shown) >= 2 else ""
    text = num(latest.value, cell.unit) + spread if latest else "no figure"
    newest = cell.points[-1] if cell.points else None
    mark = "" if newest is None else _MARKS.get(newest.status, "")
    if mark == "regression" and newest is not None and newest.drift_since is not None:
        mark = "drift"
    return {
        "svg": Markup(spark),
        "text": text,
        "na": "",
        "status": mark,
        "alert": _alert_view(_shown(cell.alert, index), grid, cell.rule.name),
    }


def _shown(alert: Alert | None, nights: dict[int, int]) -> Alert | None:
    """A cell's alert unless it was fixed before the nights shown."""
    if alert is None or (alert.state == FIXED and alert.fixed_run not in nights):
        return None
    return alert


def _alert_view(alert: Alert | None, grid: SessionGrid, metric: str | None = None) -> dict | None:
    """An alert as a history cell (of `metric`) or the grid's list shows it: number, state, age, whether the
    cell's metric recovered inside it; overdue when untriaged too long; `what` lists its metrics."""
    if alert is None:
        return None
    age = alert.age_days()
    who = f" of #{alert.of_alert}" if alert.of_alert else (f" · {alert.owner}" if alert.owner else "")
    mine = alert.metric(grid.session, metric) if metric else None
    back = " · this one recovered" if mine is not None and mine.recovered_run is not None else ""
    more = f" · {len(alert.metrics)} metrics" if metric and len(alert.metrics) > 1 else ""
    return {"id": alert.id, "state": alert.state, "text": f"#{alert.id} {alert.state}{who} · {age:.1f} d{more}{back}",
            "overdue": alert.overdue(grid.untriaged_days), "title": alert.line(width=400), "device": alert.device,
            "what": alert.what(400)}  # fmt: skip


def write_health(reports_dir: Path, started: str, health: list[dict], skipped: dict[str, str]) -> Path:
    """(Re)write reports/health.html: each device's state, failures, recoveries and MTBF (the nightly's)."""
    path = reports_dir / "health.html"
    reports_dir.mkdir(parents=True, exist_ok=True)
    page = _ENV.get_template("health.html.j2").render(started=started, health=health, skipped=skipped, css=_css())
    _atomic_write(path, page)
    return path


def _relink_for_top_level(page: str) -> str:
    """latest.html lives one level above runs/: fix its link to the index."""
    return page.replace('href="../index.html"', 'href="index.html"')


def _css() -> Markup:
    return Markup((_HERE / "style.css").read_text(encoding="utf-8"))


def _atomic_write(path: Path, text: str) -> None:
    """`path` replaced whole by `text`, or left as it was: the temporary file goes on any error (a full disk)."""
    write_file(path, text, what="report folder")  # a new temp file (never through a link), renamed over `path`

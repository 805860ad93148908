"""Small inline-SVG plots: line charts with labelled axes and units, bands, markers. No JavaScript.

Large series are downsampled before they get here (see `bench.report.downsample`); a plot never holds
more than a few thousand points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

import numpy as np

WIDTH, HEIGHT = 640, 220
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 62, 12, 12, 38
# Neutral series colours: red and green are kept for verdicts.
PALETTE = ("#2f5d9e", "#8a8a8a", "#7b4fa0", "#c07a12", "#1d8a99")
REGRESSION, IMPROVED = "#c62828", "#2e7d32"  # verdict colours: only where a verdict says so
DRIFT = REGRESSION  # a drift is a regression; its marks are rings and change-point lines, not dots


@dataclass
class Line:
    """A polyline series."""

    x: np.ndarray
    y: np.ndarray
    label: str
    color: str = PALETTE[0]
    dashed: bool = False
    step: bool = False  # draw as a step function (CDFs)


@dataclass
class Band:
    """A filled min..max band (downsampled dense series)."""

    x: np.ndarray
    low: np.ndarray
    high: np.ndarray
    label: str
    color: str = PALETTE[0]


@dataclass
class Marker:
    """A vertical marker at x, with a hover title (faults, model switches)."""

    x: float
    title: str
    color: str = PALETTE[3]


@dataclass
class Plot:
    """One chart: axes with labels (units included) and what to draw."""

    title: str
    x_label: str
    y_label: str
    lines: list[Line] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    x_range: tuple[float, float] | None = None
    y_range: tuple[float, float] | None = None
    x_ticks: list[tuple[float, str]] | None = None  # explicit ticks (e.g. run ids)
    width: int = WIDTH
    height: int = HEIGHT


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step) + 1)]


def fmt(value: float) -> str:
    """A number short enough for an axis label."""
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:.6g}" if abs(value) >= 100 else f"{value:.3g}"


def render(plot: Plot) -> str:
    """The plot as an <svg> element string."""
    xs = [a for s in plot.lines for a in (s.x,)] + [b.x for b in plot.bands] + [np.array([m.x]) for m in plot.markers]
    ys = [s.y for s in plot.lines] + [b.low for b in plot.bands] + [b.high for b in plot.bands]
    x0, x1 = plot.x_range or _extent(xs)
    y0, y1 = plot.y_range or _extent(ys, pad=0.05)
    if plot.y_range is None and len(plot.lines) + len(plot.bands) >= 2:
        y1 += 0.15 * (y1 - y0)  # head room for the legend
    left, top = MARGIN_LEFT, MARGIN_TOP
    w, h = plot.width - MARGIN_LEFT - MARGIN_RIGHT, plot.height - MARGIN_TOP - MARGIN_BOTTOM

    def sx(v: np.ndarray | float) -> np.ndarray:
        return left + (np.asarray(v, dtype=float) - x0) / ((x1 - x0) or 1.0) * w

    def sy(v: np.ndarray | float) -> np.ndarray:
        return top + h - (np.asarray(v, dtype=float) - y0) / ((y1 - y0) or 1.0) * h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{plot.width}" height="{plot.height}" '
        f'viewBox="0 0 {plot.width} {plot.height}" role="img" aria-label="{escape(plot.title)}">',
        f"<title>{escape(plot.title)}</title>",
        f'<rect x="{left}" y="{top}" width="{w}" height="{h}" class="frame"/>',
    ]
    for t in nice_ticks(y0, y1):
        y = float(sy(t))
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 3:.1f}" class="tick" text-anchor="end">{fmt(t)}</text>')
    x_ticks = plot.x_ticks if plot.x_ticks is not None else [(t, fmt(t)) for t in nice_ticks(x0, x1, 6)]
    for t, text in x_ticks:
        x = float(sx(t))
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + h}" y2="{top + h + 4}" class="axis"/>')
        parts.append(f'<text x="{x:.1f}" y="{top + h + 15}" class="tick" text-anchor="middle">{escape(text)}</text>')
    parts.append(
        f'<text x="{left + w / 2:.1f}" y="{plot.height - 4}" class="label" text-anchor="middle">'
        f"{escape(plot.x_label)}</text>"
    )
    parts.append(
        f'<text x="12" y="{top + h / 2:.1f}" class="label" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + h / 2:.1f})">{escape(plot.y_label)}</text>'
    )
    parts.append(f'<svg x="{left}" y="{top}" width="{w}" height="{h}" viewBox="{left} {top} {w} {h}">')
    for band in plot.bands:
        px, lo, hi = sx(band.x), sy(band.low), sy(band.high)
        points = " ".join(
            f"{a:.1f},{b:.1f}"
            for a, b in zip(np.concatenate([px, px[::-1]]), np.concatenate([hi, lo[::-1]]), strict=True)
        )
        parts.append(
            f'<polygon points="{points}" fill="{band.color}" fill-opacity="0.35" stroke="none">'
            f"<title>{escape(band.label)}</title></polygon>"
        )
    for line in plot.lines:
        x, y = line.x, line.y
        if line.step and x.size:
            x, y = np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]
        keep = np.isfinite(x) & np.isfinite(y)
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(sx(x[keep]), sy(y[keep]), strict=True))
        dash = ' stroke-dasharray="5,3"' if line.dashed else ""
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{line.color}" stroke-width="1.5"{dash}>'
            f"<title>{escape(line.label)}</title></polyline>"
        )
        if x.size <= 40:  # few points (trends): show them
            for a, b in zip(sx(x[keep]), sy(y[keep]), strict=True):
                parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{line.color}"/>')
    for m in plot.markers:
        x = float(sx(m.x))
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + h}" stroke="{m.color}" '
            f'stroke-width="2"><title>{escape(m.title)}</title></line>'
        )
    parts.append("</svg>")
    parts.append(_legend(plot, left, top))
    parts.append("</svg>")
    return "".join(parts)


def timeline(title: str, events: list[tuple[float, str, str]], end_s: float, width: int = WIDTH) -> str:
    """Events (time s, row label, hover text) as dots on one row per label, over 0..end_s seconds."""
    rows = sorted({label for _, label, _ in events})
    left, row_h = 130, 22
    w = width - left - MARGIN_RIGHT
    height = MARGIN_TOP + row_h * len(rows) + MARGIN_BOTTOM
    end_s = max(end_s, max((t for t, _, _ in events), default=0.0), 1e-9)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<rect x="{left}" y="{MARGIN_TOP}" width="{w}" height="{row_h * len(rows)}" class="frame"/>',
    ]
    for i, label in enumerate(rows):
        y = MARGIN_TOP + row_h * i + row_h / 2
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{y}" y2="{y}" class="grid"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4}" class="label" text-anchor="end">{escape(label)}</text>')
    for t, label, text in events:
        x = left + t / end_s * w
        y = MARGIN_TOP + row_h * rows.index(label) + row_h / 2
        parts.append(f'<circle cx="{x:.1f}" cy="{y}" r="5" fill="{PALETTE[3]}"><title>{escape(text)}</title></circle>')
    bottom = MARGIN_TOP + row_h * len(rows)
    for t in nice_ticks(0.0, end_s, 6):
        x = left + t / end_s * w
        parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" class="tick" text-anchor="middle">{fmt(t)}</text>')
    parts.append(
        f'<text x="{left + w / 2}" y="{height - 4}" class="label" text-anchor="middle">'
        "time since run start (s)</text></svg>"
    )
    return "".join(parts)


def _legend(plot: Plot, left: float, top: float) -> str:
    lines = [(s.label, s.color, s.dashed, False) for s in plot.lines]
    items = lines + [(b.label, b.color, False, True) for b in plot.bands]
    if len(items) < 2:
        return ""
    out, x = [], left + 8
    for label, color, dashed, band in items:
        if band:  # the swatch looks like the band: a translucent block, not a line like the mean's
            out.append(f'<rect x="{x}" y="{top + 5}" width="16" height="10" fill="{color}" fill-opacity="0.35"/>')
        else:
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            y = top + 10
            out.append(f'<line x1="{x}" x2="{x + 16}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 20}" y="{top + 14}" class="tick">{escape(label)}</text>')
        x += 28 + 6.5 * len(label)
    return "".join(out)


def _extent(arrays: list[np.ndarray], pad: float = 0.0) -> tuple[float, float]:
    finite = [a[np.isfinite(a)] for a in arrays if a.size]
    finite = [a for a in finite if a.size]
    if not finite:
        return 0.0, 1.0
    low = min(float(a.min()) for a in finite)
    high = max(float(a.max()) for a in finite)
    if high == low:
        return low - 1.0, high + 1.0
    span = high - low
    return low - pad * span, high + pad * span


@dataclass(frozen=True)
class SparkPoint:
    """One night in a history cell: its value (None: no figure), its link and hover text, and its mark."""

    y: float | None
    href: str
    title: str
    mark: str = ""  # "", "regression", "drift", "not reproduced", "inconclusive"


SPARK_W, SPARK_H, SPARK_AXIS = 150, 58, 12  # a history cell; the bottom SPARK_AXIS px are its time axis


def spark(
    points: list[SparkPoint],
    *,
    label: str,
    change_points: Sequence[tuple[int, str]] = (),
    failures: Sequence[tuple[int, str]] = (),
    ticks: Sequence[tuple[int, str]] = (),
    slots: int | None = None,
) -> str:
    """A small series over nights (index = night): every point a link to its run; regressions filled red, drift
    nights red rings, "not reproduced" and "inconclusive" grey rings; `change_points` (a drift's first night) as red
    dashed lines, `failures` (the device's part did not finish) as orange crosses and `ticks` (fingerprint changes)
    as short marks on the time axis. `slots` nights wide (default: the points')."""
    n = max(slots or len(points), 2)
    left, right, top, bottom = 3.0, SPARK_W - 3.0, 4.0, SPARK_H - SPARK_AXIS - 2.0
    ys = [p.y for p in points if p.y is not None and math.isfinite(p.y)]
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if y1 == y0:
        y0, y1 = y0 - (abs(y0) * 0.05 or 1.0), y1 + (abs(y1) * 0.05 or 1.0)
    pad = 0.08 * (y1 - y0)
    y0, y1 = y0 - pad, y1 + pad

    def sx(i: int) -> float:
        return left + i / (n - 1) * (right - left)

    def sy(v: float) -> float:
        return bottom - (v - y0) / (y1 - y0) * (bottom - top)

    axis = SPARK_H - SPARK_AXIS
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{SPARK_W}" height="{SPARK_H}" '
        f'viewBox="0 0 {SPARK_W} {SPARK_H}" role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>',
        f'<line x1="{left}" x2="{right}" y1="{axis}" y2="{axis}" class="axis"/>',
    ]
    for i, title in change_points:
        parts.append(
            f'<line x1="{sx(i):.1f}" x2="{sx(i):.1f}" y1="{top - 2}" y2="{axis}" stroke="{DRIFT}" stroke-width="1.5" '
            f'stroke-dasharray="3,2"><title>{escape(title)}</title></line>'
        )
    for i, title in ticks:
        parts.append(
            f'<line x1="{sx(i):.1f}" x2="{sx(i):.1f}" y1="{axis}" y2="{axis + 6}" stroke="{PALETTE[2]}" '
            f'stroke-width="2"><title>{escape(title)}</title></line>'
        )
    for i, title in failures:
        x, y = sx(i), axis + 7
        cross = f"M{x - 3:.1f},{y - 3:.1f}l6,6m-6,0l6,-6"
        parts.append(
            f'<path d="{cross}" stroke="{PALETTE[3]}" stroke-width="1.8"><title>{escape(title)}</title></path>'
        )
    runs: list[list[str]] = [[]]  # polyline pieces: a night without a figure breaks the line
    for i, p in enumerate(points):
        if p.y is None or not math.isfinite(p.y):
            runs.append([])
        else:
            runs[-1].append(f"{sx(i):.1f},{sy(p.y):.1f}")
    for piece in runs:
        if len(piece) >= 2:
            parts.append(f'<polyline points="{" ".join(piece)}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.2"/>')
    for i, p in enumerate(points):
        if p.y is None or not math.isfinite(p.y):
            continue
        x, y = sx(i), sy(p.y)
        if p.mark == "regression":
            dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{REGRESSION}"/>'
        elif p.mark == "drift":
            dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#fff" stroke="{DRIFT}" stroke-width="1.8"/>'
        elif p.mark in ("not reproduced", "inconclusive"):
            dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="#fff" stroke="{PALETTE[1]}" stroke-width="1.5"/>'
        else:
            dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="1.8" fill="{PALETTE[0]}"/>'
        parts.append(f'<a href="{escape(p.href)}"><title>{escape(p.title)}</title>{dot}</a>')
    parts.append("</svg>")
    return "".join(parts)

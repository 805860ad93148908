"""The statistics verdict rules and reports use, with one definition each.

Percentiles are nearest-rank (the value at sorted index ceil(q*n)-1), the same everywhere in the bench.
FPS = 1 / mean frame time (PresentMon); "1% low" = 1 / P99 frame time (CapFrameX).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def percentile(values: np.ndarray, q: float) -> float:
    """Nearest-rank q-quantile (q in [0, 1]) of `values`; NaN when empty."""
    if values.size == 0:
        return float("nan")
    return float(np.quantile(values, q, method="inverted_cdf"))


def fps_from_intervals(interval_ms: np.ndarray) -> float:
    """Achieved FPS: 1 / mean frame time (of each row, for a 2-D array)."""
    if interval_ms.size == 0:
        return float("nan")
    with np.errstate(divide="ignore"):
        return 1000.0 / np.mean(interval_ms, axis=-1)


def low_1pct_fps(interval_ms: np.ndarray) -> float:
    """CapFrameX "1% low": 1 / P99 frame time."""
    p99 = percentile(interval_ms, 0.99)
    return 1000.0 / p99 if p99 > 0 else float("nan")


def window_peaks(t_s: np.ndarray, values: np.ndarray, window_s: float) -> np.ndarray:
    """The maximum of `values` in each `window_s`-long window of time that has samples (t_s ascending)."""
    keep = np.isfinite(t_s) & np.isfinite(values)
    t_s, values = t_s[keep], values[keep]
    if t_s.size == 0:
        return np.empty(0)
    window = np.floor((t_s - t_s[0]) / window_s).astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], window[1:] != window[:-1])))
    return np.maximum.reduceat(values, starts)


@dataclass(frozen=True)
class Statistic:
    """A named statistic of a sample: how to compute it and what kind of thing it is."""

    compute: Callable[[np.ndarray], float]  # non-percentile statistics also work row-wise on 2-D arrays
    quantile: float | None = None  # set for percentile-type statistics (fast exact bootstrap)
    of_quantile: Callable[[np.ndarray], np.ndarray] | None = None  # quantile values -> statistic values
    location: bool = False  # a location (median/mean-like): Mann-Whitney U is a fitting test
    inverts: bool = False  # higher samples give a lower statistic (FPS from frame times)
    unit: str | None = None  # unit of the statistic when it differs from the samples' unit


def _pct(q: float) -> Statistic:
    return Statistic(lambda v: percentile(v, q), quantile=q, of_quantile=lambda x: x, location=q == 0.5)


STATISTICS: dict[str, Statistic] = {
    "median": _pct(0.5),
    "p50": _pct(0.5),
    "p90": _pct(0.9),
    "p95": _pct(0.95),
    "p99": _pct(0.99),
    "mean": Statistic(lambda v: np.mean(v, axis=-1) if v.size else float("nan"), location=True),
    "std": Statistic(lambda v: np.std(v, axis=-1) if v.size else float("nan")),
    "fps": Statistic(fps_from_intervals, location=True, inverts=True, unit="FPS"),
    "low_1pct": Statistic(low_1pct_fps, quantile=0.99, of_quantile=lambda x: 1000.0 / x, inverts=True, unit="FPS"),
}

"""Reduce large per-frame series to what a plot can show, keeping extremes visible."""

from __future__ import annotations

import numpy as np


def minmax_buckets(t: np.ndarray, y: np.ndarray, buckets: int = 500) -> tuple[np.ndarray, ...]:
    """Split time-ordered (t, y) into equal time buckets; return (centre, min, max, mean) of the non-empty ones.

    Spikes survive downsampling because every bucket keeps its maximum.
    """
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    if t.size == 0:
        empty = np.empty(0)
        return empty, empty, empty, empty
    if t.size <= buckets:
        return t, y, y, y
    edges = np.linspace(t[0], t[-1], buckets + 1)
    starts = np.unique(np.searchsorted(t, edges[:-1], side="left"))
    starts = starts[starts < t.size]
    counts = np.diff(np.append(starts, t.size))
    centre = np.add.reduceat(t, starts) / counts
    return centre, np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts), np.add.reduceat(y, starts) / counts


def cdf_points(values: np.ndarray, points: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(value, cumulative fraction) pairs of the empirical CDF, denser in the upper tail, ending at the maximum."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.empty(0), np.empty(0)
    ordered = np.sort(values, kind="stable")  # linear on already-sorted samples (histograms)
    tail = 1.0 - np.logspace(-1, -4, points // 3)  # 0.9 .. 0.9999
    probs = np.unique(np.concatenate([np.linspace(0.0, 0.9, points - points // 3), tail, [1.0]]))
    index = np.clip(np.ceil(probs * ordered.size).astype(int) - 1, 0, ordered.size - 1)
    return ordered[index], (index + 1) / ordered.size


def rate_per_window(t_s: np.ndarray, window_s: float = 1.0, max_points: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Events per second over time (FPS over time from frame times), in windows of at least `window_s`."""
    t_s = t_s[np.isfinite(t_s)]
    if t_s.size < 2:
        return np.empty(0), np.empty(0)
    span = float(t_s[-1] - t_s[0])
    window = max(window_s, span / max_points)
    full_windows = int(span // window)  # a partial last window would read as a drop in rate
    if full_windows < 1:
        return np.empty(0), np.empty(0)
    edges = t_s[0] + window * np.arange(full_windows + 1)
    counts, _ = np.histogram(t_s, bins=edges)
    return edges[:-1] + window / 2, counts / window

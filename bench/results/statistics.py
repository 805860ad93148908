"""Statistics the report reads from stored series (verdicts read stored per-run measurements instead)."""

from __future__ import annotations

import numpy as np


def window_peaks(t_s: np.ndarray, values: np.ndarray, window_s: float) -> np.ndarray:
    """The maximum of `values` in each `window_s`-long window of time that has samples (t_s ascending)."""
    keep = np.isfinite(t_s) & np.isfinite(values)
    t_s, values = t_s[keep], values[keep]
    if t_s.size == 0:
        return np.empty(0)
    window = np.floor((t_s - t_s[0]) / window_s).astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], window[1:] != window[:-1])))
    return np.maximum.reduceat(values, starts)

"""Mann-Whitney U test, one-sided, in numpy: exact null distribution for small samples without ties,
normal approximation with tie and continuity correction otherwise (the same choices as scipy's, whose
import alone costs the CLI about a second)."""

from __future__ import annotations

import functools
import math

import numpy as np

EXACT_MAX = 20  # exact distribution when both samples have at most this many values and there are no ties


def mann_whitney_p(x: np.ndarray, y: np.ndarray, alternative: str) -> float:
    """One-sided p-value that `x` is stochastically "greater" (or "less") than `y`."""
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', not {alternative!r}")
    n1, n2 = int(x.size), int(y.size)
    ranks, tie_sizes = _ranks(np.concatenate([x, y]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u = u1 if alternative == "greater" else n1 * n2 - u1  # large u speaks for the alternative
    if max(n1, n2) <= EXACT_MAX and np.all(tie_sizes == 1):
        counts = _u_counts(n1, n2)
        return float(counts[math.ceil(u) :].sum() / counts.sum())
    total = n1 + n2
    ties = float(np.sum(tie_sizes**3 - tie_sizes))
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0  # every value equal: no evidence either way
    z = (u - n1 * n2 / 2 - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based ranks with ties averaged, and the sizes of the tie groups."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    sizes = np.diff(np.append(starts, values.size))
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(starts + (sizes + 1) / 2, sizes)
    return ranks, sizes


@functools.cache
def _u_counts(m: int, n: int) -> np.ndarray:
    """How many arrangements of m x's and n y's give U = 0, 1, ..., m*n (U counts y's below each x)."""
    if m == 0 or n == 0:
        return np.ones(1)
    # The largest value is an x (above all n y's: adds n) or a y (adds nothing).
    with_x, with_y = _u_counts(m - 1, n), _u_counts(m, n - 1)
    out = np.zeros(m * n + 1)
    out[n : n + with_x.size] += with_x
    out[: with_y.size] += with_y
    return out

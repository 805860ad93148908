"""Which change-point method finds a creep: the drift test the nightly uses (bench.results.drift), Page's CUSUM
against a fixed reference, and E-divisive means (MongoDB's signal-processing-algorithms, the method inside Apache
Otava), on synthetic histories at the run-to-run noise measured on the virtual fleet.

    .venv/bin/python -m tests.bench bench_drift_methods [--trials 2000] [--edivisive]

E-divisive is optional: its package pins Python ~3.11 and numpy ^1.24 (the bench runs numpy 2.4), so it is not a
dependency. To include it: `.venv/bin/pip install --no-deps --target DIR signal-processing-algorithms
more-itertools structlog`, then run with `PYTHONPATH=DIR` (`python -m tests.bench` keeps the caller's PYTHONPATH
after the tests' folders) and `--edivisive`.

Each method gets the same floor rule as the nightly (each of the two newest nights past the metric's floor
against the reference), so the comparison is of the change-point statistics. Prints, per method and noise: the
false-alarm rate per night (25 unchanged nights, the last judged), how often a creep of 3% a night after 10 flat
nights is caught within 8 nights (and its median night), and how often the first night named is within one of
the true one.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable

import numpy as np

from bench.results.drift import RECENT, find_drift
from bench.results.thresholds import load_thresholds

RULE = load_thresholds().rule("inference_p50")
WINDOW = 5
Method = Callable[[np.ndarray], int | None]  # series -> the first night of a drift (index), or None


def _past_floor(x: np.ndarray, first: int) -> bool:
    ref = x[max(0, first - 20) : first]
    return bool(np.min(x[-RECENT:] / ref.mean() - 1.0) * 100 >= RULE.threshold_pct)


def split_t(x: np.ndarray) -> int | None:
    found = find_drift(RULE, list(range(x.size)), list(x), WINDOW)
    return found.since_run if found else None


def cusum(x: np.ndarray, k: float = 0.5, h: float = 5.0) -> int | None:
    """Page's one-sided CUSUM on logs against the first window's mean and spread; the change point is where the sum
    last left zero."""
    ref = np.log(x[:WINDOW])
    mu, sd = ref.mean(), max(ref.std(ddof=1), 1e-12)
    total, start = 0.0, None
    for i in range(WINDOW, x.size):
        total = max(0.0, total + (np.log(x[i]) - mu) / sd - k)
        start = None if total == 0 else (i if start is None else start)
    return start if total > h and start is not None and _past_floor(x, start) else None


def edivisive(x: np.ndarray) -> int | None:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    points = e_divisive(np.log(x), pvalue=0.01, permutations=199)
    if not points:
        return None
    first = max(points)
    return first if first >= WINDOW and x.size - first >= 3 and _past_floor(x, first) else None


def _series(rng: np.random.Generator, flat: int, creep: int, cv: float, rate: float) -> np.ndarray:
    trend = np.r_[np.ones(flat), (1.0 + rate) ** np.arange(1, creep + 1)]
    return 100.0 * trend * rng.lognormal(0.0, cv, flat + creep)


def measure(method: Method, cv: float, trials: int) -> str:
    rng = np.random.default_rng(7)
    np.random.seed(7)  # E-divisive's permutations use the global generator
    started = time.monotonic()
    alarms = sum(method(_series(rng, 25, 0, cv, 0.0)) is not None for _ in range(trials))
    caught, named = [], []
    for _ in range(max(trials // 4, 20)):
        x = _series(rng, 10, 12, cv, 0.03)
        night = next(((n, f) for n in range(1, 13) if (f := method(x[: 10 + n])) is not None), None)
        caught.append(night[0] if night else 99)
        if night:
            named.append(night[1] - 9)
    c, s = np.array(caught), np.array(named)
    return (f"false alarms {alarms / trials:.2%}; 3%/night caught within 8 nights {np.mean(c <= 8):.1%} (median night "
            f"{np.median(c):.0f}); first night named within 1: {np.mean(np.abs(s - 1) <= 1) if s.size else 0:.0%}; "
            f"{time.monotonic() - started:.1f} s")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--edivisive", action="store_true", help="include E-divisive (signal-processing-algorithms)")
    args = p.parse_args()
    methods: dict[str, tuple[Method, int]] = {"split t (nightly)": (split_t, args.trials)}
    methods["CUSUM"] = (cusum, args.trials)
    if args.edivisive:
        if importlib.util.find_spec("signal_processing_algorithms") is None:
            print("--edivisive: signal_processing_algorithms is not importable (give its folder in PYTHONPATH)",
                  file=sys.stderr)  # fmt: skip
            return 2
        methods["E-divisive"] = (edivisive, max(args.trials // 6, 40))  # a permutation test: ~100x slower
    for name, (method, trials) in methods.items():
        for cv in (0.012, 0.05, 0.16):
            print(f"{name:18s} cv {cv:5.1%} ({trials} trials): {measure(method, cv, trials)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

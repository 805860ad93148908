"""Results: the run store (runs, devices, measurements, histograms, faults, frame records; docs/results.md),
baselines and regression verdicts."""

from bench.results.store import ResultStore, open_store

__all__ = ["ResultStore", "open_store"]

"""The results store: runs, devices, measurements, histograms, faults and frame records (docs/results.md)."""

from bench.results.store import ResultStore, open_store

__all__ = ["ResultStore", "open_store"]

"""The results store (SQLite or PostgreSQL): runs, devices, measurements, histograms, faults, frame records
and telemetry (docs/results.md)."""

from bench.store.results import ResultStore, open_store

__all__ = ["ResultStore", "open_store"]

"""The results store (SQLite or PostgreSQL): one store per kind of record, each owning its tables and their SQL
(runs, frames, measures, verdicts, windows, alerts, health, raw), and the read model pages read a run through
(bench.store.reading); docs/results.md."""

"""Alerts: what a team does with the confirmed regressions, drifts and product failures of a nightly, one alert per
cause on a device listing every metric it moved (docs/alerts.md).

Kept in the results store (SQLite, or PostgreSQL shared by a lab's bench hosts). The nightly records each night's
findings (`record_night`); `night_alerts` gives a night's alerts split into new and known; people triage them
with `hilbench alerts` (bench.alerts.triage)."""

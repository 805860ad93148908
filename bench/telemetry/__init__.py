"""Board telemetry (temperature, CPU frequency and throttling, memory) sampled in the background
during a run, like OpenHTF monitors."""

from bench.telemetry.monitor import Sample, TelemetryMonitor, summarize

__all__ = ["Sample", "TelemetryMonitor", "summarize"]

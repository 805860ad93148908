"""Board telemetry (temperature, CPU frequency and throttling, memory) sampled in the background
during a run, like OpenHTF monitors."""

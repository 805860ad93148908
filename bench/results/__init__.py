"""Results: run store, baselines and regression verdicts."""

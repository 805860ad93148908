"""Device health: the recovery ladder (`recover`), the recovering agent session runs use, and the
good/bad record with each device's failure history (`records`)."""

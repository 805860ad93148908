"""Typed measurements and the metrics the bench derives from frame records and input send times."""

"""Recorded multimodal sessions (MCAP), their generator, and the paced replayer."""

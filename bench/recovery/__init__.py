"""Device health: the recovery ladder (`recover`), the recovering agent session runs use, and the
good/bad record with each device's failure history (`records`)."""

from bench.recovery.ladder import STEPS, RecoveryResult, StepOutcome, recover

__all__ = ["STEPS", "RecoveryResult", "StepOutcome", "recover"]

"""How many samples a percentile needs before it can be trusted (MLPerf LoadGen's early-stopping floors)."""

from __future__ import annotations

import math

# LoadGen's minimum query counts with no over-latency queries: 64 for P90, 662 for P99. Both are the
# smallest n with p**n <= UNSEEN_TAIL (the chance that n samples all fall below the p-quantile);
# other percentiles use the same rule.
UNSEEN_TAIL = 0.0013
LOADGEN_FLOORS = {90.0: 64, 99.0: 662}


def min_samples(percentile: float) -> int:
    """Fewest samples for `percentile` (0-100) to be reported without a too-few-samples flag."""
    if percentile in LOADGEN_FLOORS:
        return LOADGEN_FLOORS[percentile]
    p = percentile / 100
    if not 0 < p < 1:
        return 1
    return math.ceil(math.log(UNSEEN_TAIL) / math.log(p))


def too_few_flags(count: int, percentiles: tuple[float, ...]) -> tuple[str, ...]:
    """`too_few_samples_for_pNN` for every percentile that `count` samples cannot support."""
    return tuple(f"too_few_samples_for_p{p:g}" for p in percentiles if count < min_samples(p))

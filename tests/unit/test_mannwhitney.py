"""The numpy Mann-Whitney U against scipy's (a test-only dependency) on exact, tied and large samples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from bench.results.mannwhitney import mann_whitney_p


@pytest.mark.parametrize("alternative", ["greater", "less"])
@pytest.mark.parametrize(
    ("n1", "n2", "kind"),
    [(5, 5, "continuous"), (8, 13, "continuous"), (20, 20, "continuous"), (6, 9, "ties"), (300, 250, "ties"),
     (3000, 2000, "continuous"), (40, 30, "continuous")],
)  # fmt: skip
def test_matches_scipy(n1: int, n2: int, kind: str, alternative: str) -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        if kind == "ties":
            x, y = rng.integers(0, 6, n1).astype(float), rng.integers(1, 7, n2).astype(float)
        else:
            x, y = rng.normal(0.3, 1, n1), rng.normal(0, 1, n2)
        method = "exact" if kind == "continuous" and max(n1, n2) <= 20 else "asymptotic"
        want = mannwhitneyu(x, y, alternative=alternative, method=method).pvalue
        assert mann_whitney_p(x, y, alternative) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_all_equal_values_give_no_evidence() -> None:
    same = np.full(30, 2.0)
    assert mann_whitney_p(same, same, "greater") == 1.0
    with pytest.raises(ValueError, match="alternative"):
        mann_whitney_p(same, same, "two-sided")

"""Results: baselines, regression verdicts against the baseline window, and bisection over builds."""

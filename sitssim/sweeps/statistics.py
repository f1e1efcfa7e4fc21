"""Intervals over replications: Student-t for a metric's mean, Wilson for a fraction.

Replications of a point differ only in their seed, so their values are independent draws
of the same run's outcome: the mean's interval is Student's t with n - 1 degrees of
freedom (none below two values), and a clause's failure fraction, a binomial proportion,
gets Wilson's score interval, which stays inside [0, 1] and is sound at 0 and n failures
where the normal approximation collapses to a point.
"""

from __future__ import annotations

import math

import pandas as pd
from scipy.stats import norm, t

CONFIDENCE = 0.95


def t_half_width(values: pd.Series, confidence: float = CONFIDENCE) -> float:
    """Half-width of the Student-t interval of the mean of ``values`` (NaNs left out);
    NaN with fewer than two values."""
    n = values.count()
    if n < 2:
        return math.nan
    return float(t.ppf(0.5 + confidence / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (sound at 0 and n successes)."""
    if n == 0:
        return math.nan, math.nan
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At 0 (n) successes the bound is 0 (1) exactly; rounding would leave it a hair inside,
    # above the fraction itself.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high

"""The intervals a sweep's summary reports, against closed forms and scipy's own."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sitssim.sweeps.statistics import CONFIDENCE, t_half_width, wilson_interval

Z = stats.norm.ppf(0.975)


@pytest.mark.parametrize("n", [1, 4, 30])
def test_wilson_at_no_successes_is_zero_to_z2_over_n_plus_z2(n: int) -> None:
    low, high = wilson_interval(0, n)
    assert low == 0.0
    assert high == pytest.approx(Z * Z / (n + Z * Z), rel=1e-12)


@pytest.mark.parametrize("n", [1, 4, 30])
def test_wilson_at_all_successes_is_n_over_n_plus_z2_to_one(n: int) -> None:
    low, high = wilson_interval(n, n)
    assert low == pytest.approx(n / (n + Z * Z), rel=1e-12)
    assert high == 1.0  # exactly: 1 - 1e-16 from rounding would sit inside the fraction


@pytest.mark.parametrize(("k", "n"), [(1, 10), (5, 10), (3, 7), (19, 20), (50, 200)])
@pytest.mark.parametrize("confidence", [0.9, CONFIDENCE, 0.99])
def test_wilson_matches_scipy_between_the_ends(k: int, n: int, confidence: float) -> None:
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k, n, confidence)
    assert (low, high) == pytest.approx((expected.low, expected.high), rel=1e-9)
    assert 0.0 < low < k / n < high < 1.0


def test_wilson_of_no_trials_is_nan() -> None:
    low, high = wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)


@pytest.mark.parametrize(
    "values",
    [
        [182.5, 205.0],
        [1.0, 2.0, 4.0, 8.0, 16.0],
        [0.31, 0.29, 0.33, 0.30, 0.35, 0.28, 0.32, 0.30, 0.29, 0.31],
    ],
)
@pytest.mark.parametrize("confidence", [0.9, CONFIDENCE])
def test_t_half_width_matches_scipys_t_interval(values: list[float], confidence: float) -> None:
    sample = np.asarray(values)
    low, high = stats.t.interval(
        confidence, len(sample) - 1, loc=sample.mean(), scale=stats.sem(sample)
    )
    assert t_half_width(pd.Series(values), confidence) == pytest.approx((high - low) / 2, rel=1e-12)


def test_t_half_width_leaves_nans_out() -> None:
    with_gaps = pd.Series([1.0, math.nan, 2.0, 4.0, math.nan])
    assert t_half_width(with_gaps) == pytest.approx(t_half_width(pd.Series([1.0, 2.0, 4.0])))


def test_t_half_width_of_identical_values_is_zero() -> None:
    assert t_half_width(pd.Series([3.0, 3.0, 3.0])) == 0.0


@pytest.mark.parametrize("values", [[], [3.0], [3.0, math.nan], [math.nan, math.nan]])
def test_t_half_width_of_fewer_than_two_values_is_nan(values: list[float]) -> None:
    assert math.isnan(t_half_width(pd.Series(values, dtype=float)))

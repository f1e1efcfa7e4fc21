"""One summary of a sample serves every metric section (latencies, TTFT, read round trips)."""

from __future__ import annotations

import numpy as np

from sitssim.summaries import sample_summary


def test_each_stat_is_its_own_and_they_come_in_the_order_asked() -> None:
    values = np.arange(1.0, 1001.0)
    summary = sample_summary(values, ("p99", "mean", "p50", "max", "p999"))
    assert list(summary) == ["p99", "mean", "p50", "max", "p999"]
    assert summary == {
        "p99": 990.01,
        "mean": 500.5,
        "p50": 500.5,
        "max": 1000.0,
        "p999": 999.001,
    }


def test_an_empty_sample_has_no_value_for_any_stat() -> None:
    assert sample_summary(np.zeros(0), ("mean", "p50")) == {"mean": None, "p50": None}

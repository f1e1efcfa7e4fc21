"""Poisson arrival times of the closed-loop workloads' request streams."""

from __future__ import annotations

import math

import numpy as np


def poisson_times(rng: np.random.Generator, start: float, stop: float, mean: float) -> np.ndarray:
    """Arrival times in ``[start, stop)`` of a Poisson stream with mean gap ``mean``, drawn
    from ``rng`` in batches sized for the expected count (so the draws, and the stream,
    depend only on the four arguments)."""
    if start >= stop:
        return np.zeros(0)
    expected = (stop - start) / mean
    n = int(expected * 1.2 + 10 * math.sqrt(expected) + 16)
    times = start + np.cumsum(rng.exponential(mean, n))
    while times[-1] < stop:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(mean, n))])
    return times[times < stop]

"""A sample summarised as the report's metrics give it: its mean, quantiles and maximum."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_LEVELS = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


def sample_summary(values: np.ndarray, stats: Sequence[str]) -> dict[str, float | None]:
    """``stats`` of ``values``, in that order: ``mean``, ``p50``, ``p99``, ``p999`` (linear
    interpolation between order statistics) or ``max``; each None for an empty sample."""
    if len(values) == 0:
        return dict.fromkeys(stats)
    levels = [s for s in stats if s in _LEVELS]
    at = dict(zip(levels, np.quantile(values, [_LEVELS[s] for s in levels]), strict=True))
    out: dict[str, float | None] = {}
    for s in stats:
        if s == "mean":
            out[s] = float(values.mean())
        elif s == "max":
            out[s] = float(values.max())
        else:
            out[s] = float(at[s])
    return out

"""A benchmark figure beside its target, as every benchmark's ``--json`` lists them.

``python -m benchmarks`` reads these lists from each benchmark it runs; ``op`` None marks a
figure reported without a target (a reference, such as the Python limit).
"""

from __future__ import annotations

from typing import Any, Literal

Op = Literal[">=", "<=", "<"]


def target(
    figure: str, value: float, op: Op | None, limit: float | None, unit: str = ""
) -> dict[str, Any]:
    """One figure: what it measured, against what, and whether that holds."""
    if op is None:
        met = None
    elif limit is None:
        raise ValueError(f"{figure}: a target needs a limit")
    else:
        met = bool({">=": value >= limit, "<=": value <= limit, "<": value < limit}[op])
    return {
        "figure": figure,
        "value": float(value),
        "op": op,
        "limit": limit,
        "unit": unit,
        "met": met,
    }


def verdict(met: bool | None) -> str:
    """A target's mark on a report line: ``met`` or ``MISSED``."""
    return "met" if met else "MISSED"

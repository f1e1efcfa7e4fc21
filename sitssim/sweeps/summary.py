"""Per point across its replications: each metric's mean and 95 % interval, each clause's
failure fraction with Wilson bounds and its measured value's mean and interval beside
its (mean) limit (:mod:`sitssim.sweeps.statistics`).

Only replications that ran (status ``ok``) count; ``replications`` and ``errors`` say how
many there were of each. A clause's fraction is of those runs, ``n/a`` verdicts included
as not failing: a clause that does not apply to a run has not failed in it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from sitssim.sweeps.rows import STATUS_OK, clause_column, metric_column
from sitssim.sweeps.statistics import CONFIDENCE, t_half_width, wilson_interval
from sitssim.sweeps.study import Study


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if values.notna().any() else math.nan


def summarise(points: pd.DataFrame, study: Study, confidence: float = CONFIDENCE) -> pd.DataFrame:
    """One row per combination of parameter values of ``points`` (``sitssim.sweep``'s
    table), in the study's order."""
    rows = []
    for index, group in points.groupby("point", sort=True):
        ran = group[group["status"] == STATUS_OK]
        first = group.iloc[0]
        row: dict[str, Any] = {"point": index}
        row.update({path: first[path] for path in study.parameters})
        row["replications"] = len(ran)
        row["errors"] = len(group) - len(ran)
        for name in study.metrics:
            values = ran[metric_column(name)]
            row[f"{metric_column(name)}.mean"] = _mean(values)
            row[f"{metric_column(name)}.ci"] = t_half_width(values, confidence)
        for clause in study.clauses:
            failed = int((ran[clause_column(clause, "verdict")] == "fail").sum())
            low, high = wilson_interval(failed, len(ran), confidence)
            row[clause_column(clause, "fail_fraction")] = (
                failed / len(ran) if len(ran) else float("nan")
            )
            row[clause_column(clause, "fail_low")] = low
            row[clause_column(clause, "fail_high")] = high
            measured = ran[clause_column(clause, "measured")]
            row[clause_column(clause, "measured.mean")] = _mean(measured)
            row[clause_column(clause, "measured.ci")] = t_half_width(measured, confidence)
            row[clause_column(clause, "limit.mean")] = _mean(ran[clause_column(clause, "limit")])
        rows.append(row)
    return pd.DataFrame(rows)

"""The common verdict: every row against one limit, the worst row measured, the breaking
rows (else the worst) as evidence.

Most clauses are judged this way: the longest route against the hop limit, the
slowest synchroniser against 1.2 ns, the latest link against 200 µs. Written once,
the rule for "worst" (the row farthest towards or past the limit, the first of
ties), for "over" (rows whose value breaks the limit; a NaN breaks none) and for
the evidence shown stays the same from clause to clause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from sitssim.spec.clause import Clause, Limit
from sitssim.spec.verdict import Basis, Verdict, evidence


@dataclass(frozen=True)
class Worst:
    """Rows judged against one limit."""

    rows: pd.DataFrame
    column: str
    limit: float
    worst: pd.Series
    over: pd.DataFrame

    @property
    def measured(self) -> float:
        return float(self.worst[self.column])

    def ties(self) -> pd.DataFrame:
        """Every row as bad as the worst."""
        return self.rows[self.rows[self.column] == self.worst[self.column]]


def worst_rows(rows: pd.DataFrame, column: str, limit: Limit, value: float | None = None) -> Worst:
    """Judge non-empty ``rows[column]`` against ``limit`` (``value`` for a formula's limit)."""
    values = rows[column]
    badness = pd.Series(limit.worst(values, value), index=rows.index)
    return Worst(
        rows=rows,
        column=column,
        limit=limit.bound(value),
        worst=rows.loc[badness.idxmax()],
        over=rows[limit.breaks(values, value)],
    )


def worst_row_verdict(
    clause: Clause,
    limit: str,
    rows: pd.DataFrame,
    column: str,
    *,
    table: str,
    ids: str,
    detail: Callable[[Worst], str],
    empty: str,
    value: float | None = None,
    show_ties: bool = False,
    basis: Basis = "measured",
) -> Verdict:
    """Pass when no row breaks the clause's ``limit``; measured is the worst row's value.

    Evidence is ``table``'s ``ids`` of the rows that break it, else of the worst row
    (of every row as bad, with ``show_ties``); missing ids (a link that never reached
    a state has no state row) are left out. No rows: ``n/a`` with the reason ``empty``.
    """
    if rows.empty:
        return clause.not_applicable(empty)
    judged = worst_rows(rows, column, clause.limits[limit], value)
    if len(judged.over):
        shown = judged.over
    elif show_ties:
        shown = judged.ties()
    else:
        shown = rows.loc[[judged.worst.name]]
    return clause.verdict_on(
        limit,
        "fail" if len(judged.over) else "pass",
        measured=judged.measured,
        value=value,
        basis=basis,
        evidence=(evidence(table, shown[ids].dropna()),),
        detail=detail(judged),
    )

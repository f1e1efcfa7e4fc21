"""Judging hand-built tables, and reading a verdict back, for the judges' table tests.

A judge reads nothing but ``ctx.tables``, so its tests hand it the few rows a case needs
and no simulation runs: each ``test_judges_on_tables_*.py`` file takes well under a
second, which is what lets mutation testing (docs/conformance.md, "Mutation testing") run
them once per mutant. A test writes the verdict it expects from the clause's words (the
limit, its operator and unit as SPEC.md gives them, the rows that break it), never from
the judge's own helpers.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from sitssim.spec.registry import JUDGES, RunContext, Verdict

Figures = tuple[str, float | None, str, float | None, str, str]


def judge(clause_id: str, **tables: pd.DataFrame) -> Verdict:
    """The registered judge of ``clause_id`` on these tables."""
    return JUDGES[clause_id](RunContext(tables=dict(tables)))


def figures(verdict: Verdict) -> Figures:
    """(verdict, measured, op, limit, unit, basis), as report.json prints them."""
    return (
        verdict.verdict,
        verdict.measured,
        verdict.op,
        verdict.limit,
        verdict.unit,
        verdict.basis,
    )


def shown(verdict: Verdict) -> list[tuple[str, list[int], int]]:
    """Each evidence entry as (table, rows, total), in the verdict's order."""
    return [(e.table, list(e.rows), e.total) for e in verdict.evidence]


def not_applicable(verdict: Verdict, reason: str) -> bool:
    """An n/a verdict with no figures and no evidence, whose detail says ``reason``."""
    return (
        verdict.verdict == "n/a"
        and verdict.measured is None
        and verdict.limit is None
        and verdict.evidence == ()
        and reason in verdict.detail
    )


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN (a never-locked CDR measures NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def table(columns: tuple[str, ...], rows: list[tuple]) -> pd.DataFrame:
    """A table of ``rows`` under ``columns`` (an empty one keeps its columns)."""
    return pd.DataFrame(rows, columns=list(columns))

"""The clause registry: every SITS2026 clause, its text, and the judge that reads the tables.

A judge is a pure function of a finished run (``RunContext``): it reads the
recorded tables, compares what was observed with the spec's limit, and
returns a ``Verdict``. Judges never read a device profile to decide; they
judge behaviour. Clauses whose layer is not modelled yet are still listed,
and judged ``n/a`` with the issue that brings them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

if TYPE_CHECKING:
    from sitssim.fabric.topology import Fabric
    from sitssim.scenario import Scenario

VerdictKind = Literal["pass", "fail", "n/a"]
EVIDENCE_ROWS = 20


@dataclass(frozen=True)
class Evidence:
    """Rows of a result table that support a verdict (ids in the table's id column)."""

    table: str
    rows: tuple[int, ...]
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "rows": list(self.rows), "total": self.total}


def evidence(table: str, ids: Any) -> Evidence:
    ids = [int(i) for i in ids]
    return Evidence(table=table, rows=tuple(ids[:EVIDENCE_ROWS]), total=len(ids))


@dataclass(frozen=True)
class Verdict:
    id: str
    layer: str
    verdict: VerdictKind
    measured: float | None = None
    limit: float | None = None
    op: str = "<="
    unit: str = ""
    basis: Literal["measured", "configured", "none"] = "none"
    evidence: tuple[Evidence, ...] = ()
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "layer": self.layer,
            "verdict": self.verdict,
            "measured": self.measured,
            "op": self.op,
            "limit": self.limit,
            "unit": self.unit,
            "basis": self.basis,
            "evidence": [e.to_dict() for e in self.evidence],
            "detail": self.detail,
        }


@dataclass
class RunContext:
    scenario: Scenario
    fabric: Fabric
    tables: dict[str, pd.DataFrame]
    facts: dict[str, Any] = field(default_factory=dict)


Judge = Callable[[RunContext], Verdict]


@dataclass(frozen=True)
class Clause:
    id: str
    layer: str
    section: str
    text: str
    issue: int | None = None

    def verdict(self, verdict: VerdictKind, **kwargs: Any) -> Verdict:
        return Verdict(id=self.id, layer=self.layer, verdict=verdict, **kwargs)

    def not_applicable(self, why: str) -> Verdict:
        return self.verdict("n/a", detail=why)


CLAUSES: dict[str, Clause] = {}
JUDGES: dict[str, Judge] = {}


def declare(clause: Clause) -> Clause:
    if clause.id in CLAUSES:
        raise ValueError(f"clause {clause.id} declared twice")
    CLAUSES[clause.id] = clause
    return clause


def judge(clause_id: str) -> Callable[[Judge], Judge]:
    """Attach a judge to a declared clause."""

    def register(fn: Judge) -> Judge:
        if clause_id not in CLAUSES:
            raise KeyError(f"no clause {clause_id} declared")
        JUDGES[clause_id] = fn
        return fn

    return register


def judge_all(ctx: RunContext) -> list[Verdict]:
    verdicts = []
    for clause in CLAUSES.values():
        fn = JUDGES.get(clause.id)
        if fn is None:
            where = f"issue #{clause.issue}" if clause.issue else "the roadmap's next layer"
            verdicts.append(clause.not_applicable(f"not modelled yet: arrives with {where}"))
        else:
            verdicts.append(fn(ctx))
    return verdicts

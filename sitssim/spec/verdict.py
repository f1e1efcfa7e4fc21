"""What a judge returns: a verdict on one clause and the result-table rows behind it.

A verdict is data for the report (``report.json`` prints ``to_dict`` as is), so its
field order and values are part of the output's byte-for-byte contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

VerdictKind = Literal["pass", "fail", "n/a"]
Basis = Literal["measured", "configured", "none"]
# Enough rows for a reader to start from, few enough to keep report.json short.
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
    """The first ``EVIDENCE_ROWS`` of ``ids``, and how many there were in all."""
    ids = [int(i) for i in ids]
    return Evidence(table=table, rows=tuple(ids[:EVIDENCE_ROWS]), total=len(ids))


def _figures(judged: Part | Verdict) -> dict[str, Any]:
    """What a verdict or a part measured, against what, and on what basis, as printed."""
    return {
        "measured": judged.measured,
        "op": judged.op,
        "limit": judged.limit,
        "unit": judged.unit,
        "basis": judged.basis,
    }


@dataclass(frozen=True)
class Part:
    """One check of a clause that makes several, each against its own limit and on its own
    basis: ``link.cdc_fifo_depth`` holds the configured depth against the formula
    (configured) and counts the words the FIFO lost (measured). The verdict fails when any
    part does, and its own figures are those of the first part that fails (else the first).
    """

    name: str
    verdict: VerdictKind
    measured: float
    op: str
    limit: float
    unit: str
    basis: Basis

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, **_figures(self)}


@dataclass(frozen=True)
class Verdict:
    id: str
    layer: str
    verdict: VerdictKind
    measured: float | None = None
    limit: float | None = None
    op: str = "<="
    unit: str = ""
    basis: Basis = "none"
    evidence: tuple[Evidence, ...] = ()
    detail: str = ""
    parts: tuple[Part, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "layer": self.layer,
            "verdict": self.verdict,
            **_figures(self),
        }
        # Only a clause of several parts has the key: every other verdict prints as before.
        if self.parts:
            out["parts"] = [p.to_dict() for p in self.parts]
        out["evidence"] = [e.to_dict() for e in self.evidence]
        out["detail"] = self.detail
        return out

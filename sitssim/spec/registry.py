"""The clause registry: each catalogue clause bound to its judge, checked once at import.

Each judge module ends with an explicit table ``JUDGES = {clause_id: judge}``; this
module lists those tables (``JUDGE_TABLES``) and binds every judge to its clause. A
modelled clause without a judge, a judge for a clause the catalogue does not hold or
marks ``modelled=False``, or a clause judged twice stops the import with a
``RegistryError``: a clause can no longer report "not modelled yet" because an
import was forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial

from sitssim.spec import (
    clock_clauses,
    fabric_clauses,
    link_clauses,
    phy_clauses,
    switch_clauses,
    token_clauses,
)
from sitssim.spec.catalogue import CLAUSES
from sitssim.spec.clause import Clause, Limit
from sitssim.spec.context import Judge, RunContext
from sitssim.spec.verdict import Evidence, Verdict, evidence

__all__ = [
    "CLAUSES",
    "JUDGES",
    "JUDGE_TABLES",
    "BoundJudge",
    "Clause",
    "Evidence",
    "Limit",
    "RegistryError",
    "RunContext",
    "Verdict",
    "bind_judges",
    "evidence",
    "fidelity_of",
    "judge_all",
]

BoundJudge = Callable[[RunContext], Verdict]

JUDGE_TABLES: tuple[Mapping[str, Judge], ...] = (
    phy_clauses.JUDGES,
    link_clauses.JUDGES,
    clock_clauses.JUDGES,
    fabric_clauses.JUDGES,
    switch_clauses.JUDGES,
    token_clauses.JUDGES,
)


class RegistryError(RuntimeError):
    """The catalogue and the judges disagree: a programming error, found at start-up."""


def bind_judges(
    clauses: Mapping[str, Clause], tables: Iterable[Mapping[str, Judge]]
) -> dict[str, BoundJudge]:
    """Each judge bound to its clause, after checking the two sides match exactly."""
    judges: dict[str, BoundJudge] = {}
    for table in tables:
        for clause_id, fn in table.items():
            clause = clauses.get(clause_id)
            if clause is None:
                raise RegistryError(f"a judge for {clause_id!r}, which the catalogue does not hold")
            if not clause.modelled:
                raise RegistryError(
                    f"a judge for {clause_id}, which the catalogue marks modelled=False"
                )
            if clause_id in judges:
                raise RegistryError(f"clause {clause_id} has two judges")
            judges[clause_id] = partial(fn, clause)
    missing = [c.id for c in clauses.values() if c.modelled and c.id not in judges]
    if missing:
        raise RegistryError(
            f"modelled clause(s) without a judge: {', '.join(missing)} (add the judge to its "
            "module's JUDGES table, or mark the clause modelled=False in the catalogue)"
        )
    return judges


JUDGES: dict[str, BoundJudge] = bind_judges(CLAUSES, JUDGE_TABLES)


def fidelity_of(ctx: RunContext) -> str:
    """What the run modelled its messages as (the ``config`` table's ``fidelity``)."""
    config = ctx.tables.get("config")
    if config is None or "fidelity" not in config:
        return "packet"
    return str(config["fidelity"].iloc[0])


def judge_all(ctx: RunContext) -> list[Verdict]:
    """A verdict on every catalogue clause, in catalogue order; in a flow-level run, a
    clause that needs packet-level facts is n/a, with what they are."""
    fluid = fidelity_of(ctx) == "flow"
    verdicts = []
    for clause in CLAUSES.values():
        if fluid and clause.packet_facts:
            verdicts.append(
                clause.not_applicable(
                    f"a flow-level run (fidelity: flow) does not model {clause.packet_facts}"
                )
            )
        elif clause.modelled:
            verdicts.append(JUDGES[clause.id](ctx))
        else:
            where = f"issue #{clause.issue}" if clause.issue else "the roadmap's next layer"
            verdicts.append(clause.not_applicable(f"not modelled yet: arrives with {where}"))
    return verdicts

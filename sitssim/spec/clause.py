"""A clause of SITS2026 as data: its words, its limits (value, operator, unit), its constants.

The catalogue (``catalogue.py``) is the one place a limit is written; a judge takes
it from the clause it is handed and never restates it, so the report's ``limit``,
``op`` and ``unit`` and the comparison the judge makes cannot drift apart.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from sitssim.spec.verdict import Basis, Part, Verdict, VerdictKind

Op = Literal["<=", "<", ">=", ">", "=="]
_HOLDS: dict[str, Callable[[Any, Any], Any]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}
# The negation written as a comparison of its own, so a missing value (NaN) breaks
# no inequality: what an unmeasured row means is the judge's to say.
_BREAKS: dict[str, Callable[[Any, Any], Any]] = {
    "<=": operator.gt,
    "<": operator.ge,
    ">=": operator.lt,
    ">": operator.le,
    "==": operator.ne,
}


@dataclass(frozen=True)
class Limit:
    """``measured <op> value``, in ``unit``.

    ``value`` is None when the spec gives a formula of the run (the skew budget grows
    with the GPU count, the TSO window with the measured round trip): the judge
    computes it from the clause's ``params`` or the run's tables and passes it in.
    """

    op: Op
    unit: str
    value: float | None = None

    def bound(self, value: float | None = None) -> float:
        """The limit's value: the catalogue's, or the run's for a formula, never both."""
        if (self.value is None) == (value is None):
            raise ValueError(
                "a constant limit takes no value from the judge; a formula needs one"
                if value is not None
                else "this limit is a formula of the run: pass its value"
            )
        return float(self.value if value is None else value)

    def holds(self, measured: Any, value: float | None = None) -> Any:
        return _HOLDS[self.op](measured, self.bound(value))

    def breaks(self, measured: Any, value: float | None = None) -> Any:
        return _BREAKS[self.op](measured, self.bound(value))

    def worst(self, values: Any, value: float | None = None) -> Any:
        """How far each value is towards (or past) the limit: larger is worse."""
        values = np.asarray(values, dtype=float)
        if self.op in ("<=", "<"):
            return values
        if self.op in (">=", ">"):
            return -values
        return np.abs(values - self.bound(value))


@dataclass(frozen=True)
class Clause:
    """One checkable rule.

    ``modelled`` says whether the simulator has the facts to judge it: a modelled
    clause must have a judge and a non-modelled one must not (``registry.py`` checks
    both at import), so an ``n/a`` "not modelled yet" is a decision written here,
    never a forgotten registration. ``issue`` names the issue that brings the model.
    ``packet_facts``: what the verdict rests on that only a packet-level run observes; a
    flow-level run (``fidelity: flow``) judges the clause n/a, saying so (None: a fluid
    run has the facts).
    """

    id: str
    layer: str
    section: str
    text: str
    issue: int | None = None
    modelled: bool = True
    limits: Mapping[str, Limit] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    packet_facts: str | None = None

    def verdict(self, verdict: VerdictKind, **kwargs: Any) -> Verdict:
        return Verdict(id=self.id, layer=self.layer, verdict=verdict, **kwargs)

    def verdict_on(
        self,
        limit: str,
        verdict: VerdictKind,
        *,
        measured: float,
        value: float | None = None,
        **kwargs: Any,
    ) -> Verdict:
        """A verdict against the named limit, which supplies the report's limit, op and unit."""
        spec = self.limits[limit]
        return self.verdict(
            verdict,
            measured=measured,
            limit=spec.bound(value),
            op=spec.op,
            unit=spec.unit,
            **kwargs,
        )

    def part(
        self,
        limit: str,
        *,
        measured: float,
        basis: Basis,
        value: float | None = None,
        name: str | None = None,
    ) -> Part:
        """One check of a clause of several: ``measured`` against the named limit, passing
        or failing by the limit itself; ``name`` tells apart two parts on one limit (the
        limit's name by default)."""
        spec = self.limits[limit]
        return Part(
            name=name or limit,
            verdict="pass" if spec.holds(measured, value) else "fail",
            measured=float(measured),
            op=spec.op,
            limit=spec.bound(value),
            unit=spec.unit,
            basis=basis,
        )

    def verdict_on_parts(self, parts: Sequence[Part], **kwargs: Any) -> Verdict:
        """Fail when any part fails; the verdict's own figures and basis are those of the
        first part that fails, else of the first part (list the strongest first)."""
        if not parts:
            raise ValueError("a verdict on parts needs at least one part")
        failing = [p for p in parts if p.verdict == "fail"]
        head = failing[0] if failing else parts[0]
        return self.verdict(
            "fail" if failing else "pass",
            measured=head.measured,
            limit=head.limit,
            op=head.op,
            unit=head.unit,
            basis=head.basis,
            parts=tuple(parts),
            **kwargs,
        )

    def not_applicable(self, why: str) -> Verdict:
        return self.verdict("n/a", detail=why)

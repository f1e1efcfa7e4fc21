"""One switch port's VC quota table (clause ``switch.vc_quota``), sans-I/O.

Theory of operation
-------------------
A quota table gives every tenant of a port a number of slots on each of the port's virtual
channels: a row per tenant, an entry per VC. Rows may be of different lengths (a missing
entry is 0 slots). The table's width is the number of VCs it configures on the port,
trailing zeros included: the port's own VC count (``vcs``, the device's) or the longest
row, whichever is larger, since a row longer than the port's VCs configures VCs beyond them.

The table has two phases and one table of rules (:data:`TRANSITIONS`, ``(phase, event) ->
(phase, action)``). While the port trains it is *settable*: :meth:`QuotaTable.update`
replaces one tenant's row (adding the tenant if it is new). When the port first reaches L0
the driver calls :meth:`QuotaTable.load` and the table is *loaded*: from then on an update
is refused, the table stays as it was, and the attempt is recorded with its time, since a
device that changes its quotas while running is a witness against ``switch.vc_quota``.
Reaching L0 again after a retrain keeps the table and its first load time: it was loaded at
link training and is not loaded again.

A device implements a table of rules: a conforming one :data:`TRANSITIONS`, a faulty one
(firmware that lets management rewrite quotas on a running port) :data:`RUNTIME_UPDATE`,
which applies an update after load. Each update record says whether the table was loaded
when the update came, so a judge sees a table changed while running from the device's
history, not from knowing which device is faulty.

The core does not know the spec's limits (8 VCs, 64 slots per port over all tenants and
VCs). A table beyond them is valid input: it is loaded and used as given, never clamped,
and :meth:`QuotaTable.facts` states what a judge needs to fail it (width, slot sum, load
time, applied and refused updates). :func:`quota_rows`, :func:`slot_rows` and
:func:`update_rows` turn the tables of a run into plain rows, one table each, keyed by
port and tenant.

Tenants map to VCs by the table itself: tenant *t* uses exactly the VCs where it has at
least one slot (:meth:`QuotaTable.tenant_vcs`). With more tenants than VCs they share
VCs. We read the source's "VC reuse" as the mean number of tenants per VC in use::

    vc_reuse = sum over tenants of |VCs(t)| / |union over tenants of VCs(t)|

which is 1.0 when no two tenants share a VC and grows with sharing (6 tenants taking 3 of
8 VCs each give 18 / 8 = 2.25). We read it so because the source's two figures fit it: 2
tenants on 8 VCs need not share (1.0), and 6 tenants that each want requests and responses
on VCs of their own cannot all have them, so they share. Figures the source reports for
particular runs are results of their mapping, not constants here. The switch-quota stage
reports each port's figure (``vc_quota_ports.vc_reuse``). When a scenario gives no
explicit table, :func:`round_robin_table` builds one from a tenant list, the port's VC
count and its slot budget.

The slot arbitration hook :meth:`QuotaTable.weights` gives, per VC, each tenant's slots
there: what a quota-weighted allocator consumes. Weights are computed once per change of
the table, so after load they cost a tuple index.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "RUNTIME_UPDATE",
    "TRANSITIONS",
    "Action",
    "Event",
    "Phase",
    "QuotaFacts",
    "QuotaTable",
    "QuotaTableError",
    "Tenant",
    "UpdateRecord",
    "quota_rows",
    "round_robin_table",
    "slot_rows",
    "update_rows",
]

Tenant = Hashable
Row = tuple[int, ...]

_NO_WEIGHTS: Final[Mapping[Tenant, int]] = MappingProxyType({})


class QuotaTableError(ValueError):
    """A table that means nothing (a negative or non-integer slot count); not a table the
    spec forbids, which is valid input."""


class Phase(StrEnum):
    SETTABLE = "settable"  # the port is training: the table may still be set
    LOADED = "loaded"  # the port has reached L0: the table is fixed


class Event(StrEnum):
    UPDATE = "update"
    LOAD = "load"  # the port reached L0


class Action(StrEnum):
    APPLY = "apply"
    REFUSE = "refuse"
    LOAD = "load"
    KEEP = "keep"  # L0 again after a retrain: the table was loaded at first training


TRANSITIONS: Final[Mapping[tuple[Phase, Event], tuple[Phase, Action]]] = MappingProxyType(
    {
        (Phase.SETTABLE, Event.UPDATE): (Phase.SETTABLE, Action.APPLY),
        (Phase.SETTABLE, Event.LOAD): (Phase.LOADED, Action.LOAD),
        (Phase.LOADED, Event.UPDATE): (Phase.LOADED, Action.REFUSE),
        (Phase.LOADED, Event.LOAD): (Phase.LOADED, Action.KEEP),
    }
)

Transitions = Mapping[tuple[Phase, Event], tuple[Phase, Action]]

RUNTIME_UPDATE: Final[Transitions] = MappingProxyType(
    {**TRANSITIONS, (Phase.LOADED, Event.UPDATE): (Phase.LOADED, Action.APPLY)}
)
"""A faulty device's rules: an update after load is applied, as before load."""


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    """One attempt to set a tenant's row, applied or refused."""

    t_ns: float
    tenant: Tenant
    slots: Row
    applied: bool
    loaded: bool  # the table had been loaded (the port was running) when the update came
    slot_sum_after: int  # the whole table's slots once the attempt was dealt with


@dataclass(frozen=True, slots=True)
class QuotaFacts:
    """What a judge of ``switch.vc_quota`` needs of one port, as the table stands."""

    vcs: int  # the table's width: VCs configured, trailing zeros included
    vcs_used: int  # VCs on which some tenant has a slot
    tenants: int
    slot_sum: int  # over all tenants and VCs
    vc_reuse: float | None  # None when no VC carries a slot
    loaded: bool
    loaded_at_ns: float | None
    loaded_vcs: int | None  # the table as loaded at link training; None: never loaded
    loaded_slot_sum: int | None
    updates_applied: int
    updates_applied_loaded: int  # of those, applied to a loaded table: changed while running
    updates_refused: int
    first_refused_ns: float | None


def _row(slots: Iterable[int]) -> Row:
    row = tuple(slots)
    for n in row:
        # bool is an int subclass; a True in a quota row is a scenario bug, not one slot.
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise QuotaTableError(f"a slot count must be a whole number >= 0, not {n!r}")
    return row


class QuotaTable:
    """A port's tenants x VCs slot table: settable until :meth:`load`, fixed afterwards."""

    def __init__(
        self,
        slots: Mapping[Tenant, Iterable[int]],
        *,
        vcs: int = 0,
        transitions: Transitions = TRANSITIONS,
    ) -> None:
        if vcs < 0:
            raise ValueError(f"a port has 0 or more VCs, not {vcs}")
        # Copied into tuples: a caller that later edits its own lists must not edit the table.
        self._rows: dict[Tenant, Row] = {tenant: _row(row) for tenant, row in slots.items()}
        self._vcs = vcs
        self._transitions = transitions
        self._phase = Phase.SETTABLE
        self._loaded_at_ns: float | None = None
        self._loaded: tuple[int, int] | None = None  # (width, slot sum) at load
        self._updates: list[UpdateRecord] = []
        self._refresh()

    def _refresh(self) -> None:
        self._width = max([self._vcs, *(len(row) for row in self._rows.values())])
        self._slot_sum = sum(sum(row) for row in self._rows.values())
        per_vc: list[dict[Tenant, int]] = [{} for _ in range(self._width)]
        for tenant, row in self._rows.items():
            for vc, n in enumerate(row):
                if n:
                    per_vc[vc][tenant] = n
        self._weights = tuple(MappingProxyType(w) for w in per_vc)

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def loaded(self) -> bool:
        return self._phase is Phase.LOADED

    @property
    def loaded_at_ns(self) -> float | None:
        return self._loaded_at_ns

    @property
    def updates(self) -> tuple[UpdateRecord, ...]:
        return tuple(self._updates)

    def rows(self) -> Mapping[Tenant, Row]:
        """Each tenant's slots per VC, as configured (rows not padded to the width)."""
        return MappingProxyType(self._rows)

    def slots(self, tenant: Tenant, vc: int) -> int:
        row = self._rows.get(tenant, ())
        return row[vc] if 0 <= vc < len(row) else 0

    @property
    def width(self) -> int:
        return self._width

    def load(self, t_ns: float) -> Action:
        """The port reached L0 at ``t_ns``; returns what the table did."""
        self._phase, action = self._transitions[self._phase, Event.LOAD]
        if action is Action.LOAD:
            self._loaded_at_ns = t_ns
            self._loaded = (self._width, self._slot_sum)
        return action

    def update(self, t_ns: float, tenant: Tenant, slots: Iterable[int]) -> Action:
        """Set ``tenant``'s row at ``t_ns``: applied before load, refused (and the table kept)
        after by a conforming device; recorded either way."""
        row = _row(slots)
        loaded = self.loaded
        self._phase, action = self._transitions[self._phase, Event.UPDATE]
        applied = action is Action.APPLY
        if applied:
            self._rows[tenant] = row
            self._refresh()
        self._updates.append(UpdateRecord(t_ns, tenant, row, applied, loaded, self._slot_sum))
        return action

    def tenant_vcs(self) -> dict[Tenant, tuple[int, ...]]:
        """The mapping rule: each tenant uses the VCs where it has slots."""
        return {
            tenant: tuple(vc for vc, n in enumerate(row) if n) for tenant, row in self._rows.items()
        }

    def vc_tenants(self) -> tuple[tuple[Tenant, ...], ...]:
        """Per VC, the tenants that share it."""
        return tuple(tuple(w) for w in self._weights)

    def vc_reuse(self) -> float | None:
        """Mean tenants per VC in use; None when no VC carries a slot."""
        used = [w for w in self._weights if w]
        if not used:
            return None
        return sum(len(w) for w in used) / len(used)

    def weights(self, vc: int) -> Mapping[Tenant, int]:
        """Tenants' slots on ``vc``, only tenants with at least one: the quota-weighted
        allocator's weights. A VC beyond the table's width has none."""
        if vc < 0:
            raise IndexError(f"VC {vc} does not exist")
        return self._weights[vc] if vc < self._width else _NO_WEIGHTS

    def slot_weights(self) -> tuple[Mapping[Tenant, int], ...]:
        """:meth:`weights` for every VC of the table, by VC index."""
        return self._weights

    def facts(self) -> QuotaFacts:
        refused = [u for u in self._updates if not u.applied]
        loaded_vcs, loaded_sum = self._loaded if self._loaded is not None else (None, None)
        return QuotaFacts(
            vcs=self._width,
            vcs_used=sum(1 for w in self._weights if w),
            tenants=len(self._rows),
            slot_sum=self._slot_sum,
            vc_reuse=self.vc_reuse(),
            loaded=self.loaded,
            loaded_at_ns=self._loaded_at_ns,
            loaded_vcs=loaded_vcs,
            loaded_slot_sum=loaded_sum,
            updates_applied=len(self._updates) - len(refused),
            updates_applied_loaded=sum(1 for u in self._updates if u.applied and u.loaded),
            updates_refused=len(refused),
            first_refused_ns=refused[0].t_ns if refused else None,
        )


def quota_rows(tables: Mapping[int, QuotaTable]) -> list[dict[str, Any]]:
    """One row per port: the port id and its :class:`QuotaFacts`."""
    return [{"port": port, **asdict(table.facts())} for port, table in tables.items()]


def slot_rows(tables: Mapping[int, QuotaTable]) -> list[dict[str, Any]]:
    """One row per (port, tenant, VC) of each table's width, zeros included, so a tenant's
    share of every VC is on record."""
    return [
        {"port": port, "tenant": tenant, "vc": vc, "slots": table.slots(tenant, vc)}
        for port, table in tables.items()
        for tenant in table.rows()
        for vc in range(table.width)
    ]


def update_rows(tables: Mapping[int, QuotaTable]) -> list[dict[str, Any]]:
    """One row per update attempt, applied or refused, in the order each port saw them."""
    return [
        {
            "port": port,
            "t_ns": u.t_ns,
            "tenant": u.tenant,
            "vcs": len(u.slots),
            "slot_sum": sum(u.slots),
            "applied": u.applied,
            "loaded": u.loaded,
            "table_slot_sum": u.slot_sum_after,
        }
        for port, table in tables.items()
        for u in table.updates
    ]


def round_robin_table(
    tenants: Sequence[Tenant], vcs: int, slots: int, vcs_per_tenant: int | None = None
) -> dict[Tenant, list[int]]:
    """A table for a port whose scenario gives none.

    Tenant *i* takes ``k`` consecutive VCs from VC ``i * k``, wrapping round the port's
    ``vcs``; ``k`` defaults to ``max(1, vcs // len(tenants))``, so up to ``vcs`` tenants get
    VCs of their own and more share them one each. The ``slots`` budget is split evenly over
    the (tenant, VC) pairs, the remainder one slot each to the first pairs; every pair gets
    at least one slot, because a tenant without one could not send, so with more pairs than
    ``slots`` the table exceeds the budget and the clause says so.
    """
    if vcs < 1:
        raise ValueError(f"a port has at least one VC, not {vcs}")
    if slots < 0:
        raise ValueError(f"a slot budget is >= 0, not {slots}")
    if len(set(tenants)) != len(tenants):
        raise ValueError("each tenant is listed once")
    if not tenants:
        return {}
    k = vcs_per_tenant if vcs_per_tenant is not None else max(1, vcs // len(tenants))
    if not 1 <= k <= vcs:
        raise ValueError(f"a tenant takes 1 to {vcs} VCs, not {k}")
    pairs = len(tenants) * k
    share, extra = divmod(slots, pairs)
    table: dict[Tenant, list[int]] = {}
    for i, tenant in enumerate(tenants):
        row = [0] * vcs
        for j in range(k):
            pair = i * k + j
            row[pair % vcs] = max(1, share + (pair < extra))
        table[tenant] = row
    return table


def message_vcs(
    table: QuotaTable, tenants: Sequence[Tenant], classes: int
) -> tuple[tuple[int, ...], ...]:
    """The VC each tenant's messages of each flow-control class travel on: ``[t][c]``.

    A tenant uses the VCs where the table gives it slots (:meth:`QuotaTable.tenant_vcs`),
    and its classes are dealt over them in order (class ``c`` on the ``c mod k``-th of its
    ``k`` VCs), so a tenant with a VC per class keeps requests and completions apart and one
    with a single VC sends them all on it. A tenant without a slot anywhere travels on VC 0,
    as every message does without a table: the table shares a port's VCs, it does not decide
    who may send.
    """
    vcs = table.tenant_vcs()
    rows = []
    for tenant in tenants:
        mine = vcs.get(tenant) or (0,)
        rows.append(tuple(mine[c % len(mine)] for c in range(classes)))
    return tuple(rows)

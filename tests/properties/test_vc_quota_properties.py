"""Property tests of the VC quota table core against clause ``switch.vc_quota``.

The clause: at most 8 VCs per port, a port's table sums to at most 64 slots over all tenants
and VCs, and the table is loaded at link training and never changed while running. The core
must load any table, forbidden or not, and report facts that show exactly where it stands
against those limits; after load no update may change it. The within and beyond tests
each draw their side only; the update test's 40 tables come out 28 over 64 slots and 15
over 8 VCs (ci profile, this file alone), and the state machine's ports are conforming or
faulty devices at random.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sitssim.switch.vc_quota import (
    RUNTIME_UPDATE,
    TRANSITIONS,
    Action,
    QuotaTable,
    round_robin_table,
)

# The clause's limits, restated independently of the core (which knows none).
SPEC_MAX_VCS = 8
SPEC_MAX_SLOTS = 64

TENANTS = ("A", "B", "C", "D", "E", "F")
Table = dict[str, list[int]]


@st.composite
def quota_tables(
    draw: st.DrawFn, *, over_slots: st.SearchStrategy[bool], over_vcs: st.SearchStrategy[bool]
) -> Table:
    """A table whose slot sum is over 64 or not, and whose width is over 8 VCs or not, as
    the two strategies decide; rows of any length up to the width, slots spread at random."""
    slots_over, vcs_over = draw(st.tuples(over_slots, over_vcs))
    width = draw(st.integers(SPEC_MAX_VCS + 1, 16) if vcs_over else st.integers(1, SPEC_MAX_VCS))
    total = draw(
        st.integers(SPEC_MAX_SLOTS + 1, 3 * SPEC_MAX_SLOTS)
        if slots_over
        else st.integers(0, SPEC_MAX_SLOTS)
    )
    tenants = draw(st.lists(st.sampled_from(TENANTS), min_size=1, max_size=6, unique=True))
    lengths = [draw(st.integers(1, width)) for _ in tenants]
    lengths[draw(st.integers(0, len(tenants) - 1))] = width
    cells = sum(lengths)
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=cells - 1, max_size=cells - 1)))
    counts = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    table: Table = {}
    for tenant, n in zip(tenants, lengths, strict=True):
        table[tenant], counts = counts[:n], counts[n:]
    return table


within_tables = quota_tables(over_slots=st.just(False), over_vcs=st.just(False))
beyond_tables = st.sampled_from([(True, False), (False, True), (True, True)]).flatmap(
    lambda over: quota_tables(over_slots=st.just(over[0]), over_vcs=st.just(over[1]))
)
# Half the slot sums exceed 64 and a quarter of the widths exceed 8 VCs.
any_table = quota_tables(over_slots=st.booleans(), over_vcs=st.sampled_from([False] * 3 + [True]))
slot_row = st.lists(st.integers(0, 40), min_size=1, max_size=12)
times = st.floats(0.0, 1e9, allow_nan=False)


def oracle_width(table: Mapping[str, Sequence[int]]) -> int:
    return max((len(row) for row in table.values()), default=0)


def oracle_sum(table: Mapping[str, Sequence[int]]) -> int:
    return sum(sum(row) for row in table.values())


def as_tuples(table: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    return {tenant: tuple(row) for tenant, row in table.items()}


@given(table=within_tables, t_load=times)
def test_switch_vc_quota_a_table_within_the_limits_loads_with_facts_within(
    table: Table, t_load: float
) -> None:
    quota = QuotaTable(table)
    assert quota.load(t_load) is Action.LOAD
    facts = quota.facts()
    assert facts.vcs == oracle_width(table) <= SPEC_MAX_VCS
    assert facts.slot_sum == oracle_sum(table) <= SPEC_MAX_SLOTS
    assert facts.loaded and facts.loaded_at_ns == t_load
    assert facts.updates_refused == 0


@given(table=beyond_tables, t_load=times)
def test_switch_vc_quota_a_table_beyond_the_limits_loads_unclamped_and_shows_its_excess(
    table: Table, t_load: float
) -> None:
    quota = QuotaTable(table)
    assert quota.load(t_load) is Action.LOAD
    facts = quota.facts()
    assert facts.vcs > SPEC_MAX_VCS or facts.slot_sum > SPEC_MAX_SLOTS
    assert (facts.vcs, facts.slot_sum) == (oracle_width(table), oracle_sum(table))
    assert facts.loaded_at_ns == t_load
    assert quota.rows() == as_tuples(table)
    # The allocator is fed the table as given, excess included.
    assert sum(sum(w.values()) for w in quota.slot_weights()) == oracle_sum(table)


@given(
    table=any_table,
    before=st.lists(st.tuples(st.sampled_from(TENANTS), slot_row), max_size=4),
    after=st.lists(st.tuples(st.sampled_from(TENANTS), slot_row), min_size=1, max_size=6),
    t_load=times,
)
def test_switch_vc_quota_no_update_after_load_changes_the_table(
    table: Table,
    before: list[tuple[str, list[int]]],
    after: list[tuple[str, list[int]]],
    t_load: float,
) -> None:
    event("slots over 64" if oracle_sum(table) > SPEC_MAX_SLOTS else "slots within 64")
    event("VCs over 8" if oracle_width(table) > SPEC_MAX_VCS else "VCs within 8")
    quota = QuotaTable(table)
    expected = as_tuples(table)
    for i, (tenant, row) in enumerate(before):
        assert quota.update(float(i), tenant, row) is Action.APPLY
        expected[tenant] = tuple(row)
    quota.load(t_load)
    loaded = (dict(quota.rows()), quota.slot_weights(), quota.facts().slot_sum)
    assert loaded[0] == expected
    for i, (tenant, row) in enumerate(after):
        assert quota.update(t_load + 1 + i, tenant, row) is Action.REFUSE
    assert (dict(quota.rows()), quota.slot_weights(), quota.facts().slot_sum) == loaded
    facts = quota.facts()
    assert (facts.updates_applied, facts.updates_refused) == (len(before), len(after))
    assert facts.first_refused_ns == t_load + 1


@given(
    tenants=st.integers(1, 40),
    vcs=st.integers(1, 12),
    slots=st.integers(0, 128),
    data=st.data(),
)
def test_switch_vc_quota_round_robin_gives_every_tenant_a_vc_and_meets_the_budget_if_it_can(
    tenants: int, vcs: int, slots: int, data: st.DataObject
) -> None:
    names = list(range(tenants))
    k = data.draw(st.none() | st.integers(1, vcs))
    table = round_robin_table(names, vcs, slots, vcs_per_tenant=k)
    quota = QuotaTable(table)
    per_tenant = k if k is not None else max(1, vcs // tenants)
    # The mapping rule, from the table: a tenant uses the VCs where it has a slot.
    mapping = {t: tuple(vc for vc, n in enumerate(row) if n) for t, row in table.items()}
    assert quota.tenant_vcs() == mapping
    assert all(len(mapping[t]) == per_tenant for t in names)
    pairs = tenants * per_tenant
    assert quota.facts().slot_sum == max(slots, pairs)
    assert quota.facts().vcs == vcs
    used = len({vc for row in mapping.values() for vc in row})
    assert quota.vc_reuse() == pairs / used
    if pairs <= vcs:
        assert quota.vc_reuse() == 1.0


class QuotaPort(RuleBasedStateMachine):
    """One port of a conforming or a faulty device (one that applies writes to a running
    table): management writes while it trains, L0, L0 again after retrains, writes while it
    runs. One rule per event; the invariants are the clause's three limits as the facts
    must show them, and the allocator's view of the table."""

    @initialize(table=any_table, port_vcs=st.integers(0, 12), faulty=st.booleans())
    def setup(self, table: Table, port_vcs: int, faulty: bool) -> None:
        rules = RUNTIME_UPDATE if faulty else TRANSITIONS
        self.quota = QuotaTable(table, vcs=port_vcs, transitions=rules)
        self.port_vcs = port_vcs
        self.faulty = faulty
        self.expected = as_tuples(table)
        self.now = 0.0
        self.loaded_at: float | None = None
        self.as_loaded: tuple[int, int] | None = None
        self.refused = 0
        self.applied_running = 0

    def _width(self) -> int:
        return max(self.port_vcs, oracle_width(self.expected))

    @rule(tenant=st.sampled_from(TENANTS), row=slot_row, dt=st.floats(0.0, 1e4))
    def management_write(self, tenant: str, row: list[int], dt: float) -> None:
        self.now += dt
        action = self.quota.update(self.now, tenant, row)
        if self.loaded_at is None or self.faulty:
            assert action is Action.APPLY
            self.expected[tenant] = tuple(row)
            self.applied_running += self.loaded_at is not None
        else:
            assert action is Action.REFUSE
            self.refused += 1

    @rule(dt=st.floats(0.0, 1e4))
    def link_reaches_l0(self, dt: float) -> None:
        self.now += dt
        action = self.quota.load(self.now)
        assert action is (Action.LOAD if self.loaded_at is None else Action.KEEP)
        if self.loaded_at is None:
            self.loaded_at = self.now
            self.as_loaded = (self._width(), oracle_sum(self.expected))

    @invariant()
    def a_running_table_changes_only_on_a_faulty_device(self) -> None:
        # switch.vc_quota's "never changed while running": the writes a running table took.
        assert self.quota.rows() == self.expected
        assert self.quota.loaded_at_ns == self.loaded_at
        facts = self.quota.facts()
        assert facts.updates_applied_loaded == self.applied_running
        assert facts.updates_refused == self.refused
        if not self.faulty:
            assert facts.updates_applied_loaded == 0

    @invariant()
    def facts_state_the_slots_and_vcs_as_loaded_and_as_they_stand(self) -> None:
        # switch.vc_quota's 64 slots and 8 VCs, judged on the table as loaded.
        facts = self.quota.facts()
        assert (facts.vcs, facts.slot_sum) == (self._width(), oracle_sum(self.expected))
        loaded = (facts.loaded_vcs, facts.loaded_slot_sum)
        assert loaded == (self.as_loaded if self.as_loaded is not None else (None, None))

    @invariant()
    def allocator_weights_are_the_table(self) -> None:
        for vc, weights in enumerate(self.quota.slot_weights()):
            assert dict(weights) == {
                t: row[vc] for t, row in self.expected.items() if vc < len(row) and row[vc]
            }


TestSwitchVcQuotaPort = QuotaPort.TestCase

"""Unit tests of the VC quota table core (``switch.vc_quota``), from the clause's seed."""

from __future__ import annotations

import pytest

from sitssim.switch.vc_quota import (
    RUNTIME_UPDATE,
    TRANSITIONS,
    Action,
    Event,
    Phase,
    QuotaTable,
    QuotaTableError,
    message_vcs,
    quota_rows,
    round_robin_table,
    slot_rows,
    update_rows,
)

SEED_A = [16, 16, 16, 16, 0, 0, 0, 0]
SEED_B = [12] * 5


def test_seed_tenant_a_fills_a_port_at_64_slots() -> None:
    table = QuotaTable({"A": SEED_A})
    assert table.load(1_500.0) is Action.LOAD
    facts = table.facts()
    assert (facts.vcs, facts.vcs_used, facts.tenants, facts.slot_sum) == (8, 4, 1, 64)
    assert facts.loaded and facts.loaded_at_ns == 1_500.0
    assert facts.vc_reuse == 1.0
    assert table.tenant_vcs() == {"A": (0, 1, 2, 3)}


def test_seed_adding_tenant_b_exceeds_64_but_loads_unclamped() -> None:
    table = QuotaTable({"A": SEED_A})
    assert table.update(100.0, "B", SEED_B) is Action.APPLY
    table.load(2_000.0)
    facts = table.facts()
    assert facts.slot_sum == 124
    assert facts.loaded_at_ns == 2_000.0
    assert table.rows() == {"A": tuple(SEED_A), "B": tuple(SEED_B)}
    # A shares VCs 0-3 with B, B is alone on VC 4: 9 tenant-VC pairs on 5 VCs.
    assert facts.vc_reuse == pytest.approx(9 / 5)
    assert table.vc_tenants()[:6] == (("A", "B"),) * 4 + (("B",), ())
    assert (facts.updates_applied, facts.updates_refused) == (1, 0)


def test_a_ninth_vc_loads_and_is_reported() -> None:
    table = QuotaTable({"A": [4] * 9})
    table.load(0.0)
    facts = table.facts()
    assert (facts.vcs, facts.vcs_used, facts.slot_sum) == (9, 9, 36)
    assert table.weights(8) == {"A": 4}


def test_trailing_zero_vcs_count_in_the_width() -> None:
    table = QuotaTable({"A": [8, 0, 0, 0, 0, 0, 0, 0, 0]})
    assert (table.facts().vcs, table.facts().vcs_used) == (9, 1)


def test_update_after_load_is_refused_recorded_and_changes_nothing() -> None:
    table = QuotaTable({"A": SEED_A})
    table.load(1_000.0)
    before = (dict(table.rows()), table.slot_weights(), table.facts().slot_sum)
    assert table.update(5_000.0, "B", SEED_B) is Action.REFUSE
    assert table.update(7_000.0, "A", [64]) is Action.REFUSE
    assert (dict(table.rows()), table.slot_weights(), table.facts().slot_sum) == before
    assert table.weights(0) == {"A": 16}
    facts = table.facts()
    assert (facts.updates_applied, facts.updates_refused) == (0, 2)
    assert facts.first_refused_ns == 5_000.0
    assert [(u.t_ns, u.tenant, u.applied) for u in table.updates] == [
        (5_000.0, "B", False),
        (7_000.0, "A", False),
    ]


def test_update_before_load_applies_and_replaces_the_row() -> None:
    table = QuotaTable({"A": SEED_A})
    assert table.update(10.0, "A", [32, 32]) is Action.APPLY
    table.load(20.0)
    assert table.rows() == {"A": (32, 32)}
    assert table.facts().vcs == 2
    assert table.weights(0) == {"A": 32}
    assert table.weights(4) == {}
    assert table.updates[0].applied and table.updates[0].t_ns == 10.0


def test_reaching_l0_again_keeps_the_table_and_the_first_load_time() -> None:
    table = QuotaTable({"A": SEED_A})
    table.load(1_000.0)
    assert table.load(9_000.0) is Action.KEEP
    assert table.loaded_at_ns == 1_000.0
    assert table.update(9_500.0, "A", [1]) is Action.REFUSE


def test_the_callers_lists_do_not_alias_the_table() -> None:
    row = list(SEED_A)
    table = QuotaTable({"A": row})
    table.load(0.0)
    row[0] = 60
    assert table.slots("A", 0) == 16
    assert table.facts().slot_sum == 64


@pytest.mark.parametrize("bad", [[-1], [1.5], [True], ["4"]])
def test_meaningless_slot_counts_are_refused(bad: list[object]) -> None:
    with pytest.raises(QuotaTableError):
        QuotaTable({"A": bad})  # type: ignore[dict-item]
    table = QuotaTable({"A": [1]})
    with pytest.raises(QuotaTableError):
        table.update(0.0, "A", bad)  # type: ignore[arg-type]
    assert table.updates == ()


def test_transition_table_is_total_and_only_settable_applies() -> None:
    assert set(TRANSITIONS) == {(p, e) for p in Phase for e in Event}
    applying = [k for k, (_, action) in TRANSITIONS.items() if action is Action.APPLY]
    assert applying == [(Phase.SETTABLE, Event.UPDATE)]
    after_load = [
        target for (phase, _), (target, _) in TRANSITIONS.items() if phase is Phase.LOADED
    ]
    assert after_load == [Phase.LOADED, Phase.LOADED]


def test_weights_per_vc_skip_tenants_without_slots() -> None:
    table = QuotaTable({"A": SEED_A, "B": SEED_B, "C": [0, 0, 0, 0, 0, 0, 0, 5]})
    assert table.weights(0) == {"A": 16, "B": 12}
    assert table.weights(4) == {"B": 12}
    assert table.weights(5) == {}
    assert table.weights(7) == {"C": 5}
    assert table.weights(20) == {}
    with pytest.raises(IndexError):
        table.weights(-1)
    assert len(table.slot_weights()) == 8


def test_empty_table_has_no_reuse_figure() -> None:
    table = QuotaTable({"A": [0, 0]})
    facts = table.facts()
    assert facts.vc_reuse is None
    assert (facts.vcs, facts.vcs_used, facts.tenants, facts.slot_sum) == (2, 0, 1, 0)
    assert table.tenant_vcs() == {"A": ()}


def test_rows_carry_port_and_tenant() -> None:
    refused = QuotaTable({"A": SEED_A})
    refused.load(1.0)
    refused.update(2.0, "B", SEED_B)
    over = QuotaTable({"A": SEED_A, "B": SEED_B})
    tables = {3: refused, 7: over}

    facts = {row["port"]: row for row in quota_rows(tables)}
    assert facts[3]["slot_sum"] == 64 and facts[3]["updates_refused"] == 1
    assert facts[3]["first_refused_ns"] == 2.0
    assert facts[7]["slot_sum"] == 124 and not facts[7]["loaded"]
    assert facts[7]["loaded_at_ns"] is None

    slots = slot_rows(tables)
    assert len(slots) == 8 + 2 * 8
    assert {"port": 7, "tenant": "B", "vc": 6, "slots": 0} in slots
    assert sum(r["slots"] for r in slots if r["port"] == 7) == 124

    assert update_rows(tables) == [
        {
            "port": 3,
            "t_ns": 2.0,
            "tenant": "B",
            "vcs": 5,
            "slot_sum": 60,
            "applied": False,
            "loaded": True,
            "table_slot_sum": 64,
        }
    ]


def test_round_robin_gives_few_tenants_their_own_vcs() -> None:
    table = QuotaTable(round_robin_table(["A", "B"], vcs=8, slots=64))
    mapping = table.tenant_vcs()
    assert mapping == {"A": (0, 1, 2, 3), "B": (4, 5, 6, 7)}
    assert table.facts().slot_sum == 64
    assert table.vc_reuse() == 1.0


def test_round_robin_shares_vcs_among_many_tenants() -> None:
    tenants = [f"t{i}" for i in range(12)]
    table = QuotaTable(round_robin_table(tenants, vcs=8, slots=64))
    assert all(len(vcs) == 1 for vcs in table.tenant_vcs().values())
    assert table.facts().vcs_used == 8
    assert table.vc_reuse() == pytest.approx(12 / 8)
    assert table.facts().slot_sum == 64


def test_round_robin_with_three_vcs_each_for_six_tenants() -> None:
    table = QuotaTable(round_robin_table(list("ABCDEF"), vcs=8, slots=64, vcs_per_tenant=3))
    assert table.vc_reuse() == pytest.approx(18 / 8)
    assert table.tenant_vcs()["C"] == (0, 6, 7)  # wraps round the port
    assert table.facts().slot_sum == 64


def test_round_robin_never_leaves_a_tenant_without_a_slot() -> None:
    tenants = list(range(100))
    table = QuotaTable(round_robin_table(tenants, vcs=8, slots=64))
    assert all(table.tenant_vcs()[t] for t in tenants)
    assert table.facts().slot_sum == 100


def test_round_robin_refuses_meaningless_arguments() -> None:
    with pytest.raises(ValueError):
        round_robin_table(["A"], vcs=0, slots=64)
    with pytest.raises(ValueError):
        round_robin_table(["A"], vcs=8, slots=64, vcs_per_tenant=9)
    with pytest.raises(ValueError):
        round_robin_table(["A", "A"], vcs=8, slots=64)
    assert round_robin_table([], vcs=8, slots=64) == {}


def test_the_table_spans_the_ports_vcs_and_a_longer_row_widens_it() -> None:
    table = QuotaTable({"A": [16, 16]}, vcs=8)
    assert (table.width, table.facts().vcs, table.facts().vcs_used) == (8, 8, 2)
    assert len(table.slot_weights()) == 8
    wider = QuotaTable({"A": [1] * 9}, vcs=8)
    assert wider.facts().vcs == 9
    # Replacing the only row with a shorter one keeps the port's own VCs.
    table.update(0.0, "A", [4])
    assert table.width == 8
    with pytest.raises(ValueError):
        QuotaTable({"A": [1]}, vcs=-1)


def test_the_loaded_table_is_kept_beside_the_table_as_it_stands() -> None:
    table = QuotaTable({"A": SEED_A}, vcs=8)
    assert table.facts().loaded_slot_sum is None and table.facts().loaded_vcs is None
    table.update(1.0, "B", [2])
    table.load(10.0)
    facts = table.facts()
    assert (facts.loaded_vcs, facts.loaded_slot_sum) == (8, 66)
    assert facts.updates_applied_loaded == 0


def test_a_faulty_device_applies_an_update_while_running_and_says_so() -> None:
    table = QuotaTable({"A": SEED_A}, vcs=8, transitions=RUNTIME_UPDATE)
    assert table.update(1.0, "A", [8] * 8) is Action.APPLY
    table.load(10.0)
    assert table.update(20.0, "B", SEED_B) is Action.APPLY
    assert table.rows()["B"] == tuple(SEED_B)
    facts = table.facts()
    # Loaded at 64 slots; running, it came to 124: the history shows when it changed.
    assert (facts.loaded_slot_sum, facts.slot_sum) == (64, 124)
    assert (facts.updates_applied, facts.updates_applied_loaded) == (2, 1)
    assert [(u.loaded, u.applied, u.slot_sum_after) for u in table.updates] == [
        (False, True, 64),
        (True, True, 124),
    ]
    # The faulty rules differ from the spec's in exactly that one transition.
    changed = {k for k in TRANSITIONS if TRANSITIONS[k] != RUNTIME_UPDATE[k]}
    assert changed == {(Phase.LOADED, Event.UPDATE)}


def test_tenants_classes_are_dealt_over_their_vcs() -> None:
    table = QuotaTable({"a": [16, 16, 16, 16], "b": [0, 0, 0, 0, 12], "c": [0, 8, 0, 8]})
    assert message_vcs(table, ["a", "b", "c", "d"], 3) == (
        (0, 1, 2),  # a VC per class: requests and completions apart
        (4, 4, 4),  # one VC: everything on it
        (1, 3, 1),  # two VCs: the third class wraps round
        (0, 0, 0),  # no slot anywhere: VC 0, as without a table
    )

"""The PCIe ordering table, its RO / IDO relaxations, the egress queue and the reorder buffer."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sitssim.fabric.ordering import (
    EgressQueue,
    Pass,
    ReorderBuffer,
    RobFullError,
    Tlp,
    may_pass,
    pass_rule,
)
from sitssim.link.credits import FcClass

P, NP, CPL = FcClass.P, FcClass.NP, FcClass.CPL


def tlp(cls: FcClass, txn_id: int = 0, **kw: object) -> Tlp:
    return Tlp(txn_id=txn_id, cls=cls, **kw)


# The Base Specification's "Ordering Rules Summary", row (later) passes column (earlier),
# with neither RO nor IDO set and distinct transactions.
@pytest.mark.parametrize(
    ("later", "earlier", "expected"),
    [
        (P, P, Pass.NO),  # A2a
        (P, NP, Pass.MUST),  # A3/A4: writes get past stalled reads (deadlock avoidance)
        (P, CPL, Pass.MAY),  # A5a
        (NP, P, Pass.NO),  # B2a: a read pushes earlier writes
        (NP, NP, Pass.MAY),  # B3/B4
        (NP, CPL, Pass.MAY),  # B5
        (CPL, P, Pass.NO),  # D2a
        (CPL, NP, Pass.MUST),  # D3/D4
        (CPL, CPL, Pass.MAY),  # D5a
    ],
)
def test_every_cell_without_relaxations(later: FcClass, earlier: FcClass, expected: Pass) -> None:
    a = tlp(later, 1, transaction=7 if later is CPL else -1)
    b = tlp(earlier, 0, transaction=8 if earlier is CPL else -1)
    assert pass_rule(a, b) is expected
    assert may_pass(a, b) is (expected is not Pass.NO)


def test_completions_of_one_transaction_stay_in_order() -> None:  # D5b
    first, second = tlp(CPL, 0, transaction=3), tlp(CPL, 1, transaction=3)
    assert not may_pass(second, first)
    assert may_pass(tlp(CPL, 1, transaction=4), first)


@pytest.mark.parametrize("cls", [P, CPL])
def test_relaxed_ordering_lets_writes_and_completions_pass_writes(cls: FcClass) -> None:
    earlier = tlp(P, 0)
    assert not may_pass(tlp(cls, 1), earlier)
    assert may_pass(tlp(cls, 1, ro=True), earlier)


def test_relaxed_ordering_does_not_let_a_read_pass_a_write() -> None:  # B2b is IDO only
    assert not may_pass(tlp(NP, 1, ro=True), tlp(P, 0))


def test_relaxations_are_the_later_tlps_not_the_earlier_ones() -> None:
    relaxed_write = tlp(P, 0, ro=True, ido=True, requester_id=1)
    assert not may_pass(tlp(NP, 1, requester_id=2), relaxed_write)
    assert not may_pass(tlp(P, 1, requester_id=2), relaxed_write)


@pytest.mark.parametrize("cls", [P, NP])
def test_id_based_ordering_separates_requester_ids_only(cls: FcClass) -> None:
    earlier = tlp(P, 0, requester_id=1)
    assert may_pass(tlp(cls, 1, ido=True, requester_id=2), earlier)
    assert not may_pass(tlp(cls, 1, ido=True, requester_id=1), earlier)
    assert not may_pass(tlp(cls, 1, ido=False, requester_id=2), earlier)


def test_id_based_ordering_of_a_completion_compares_its_completer_id() -> None:  # D2b
    write = tlp(P, 0, requester_id=5)
    assert not may_pass(tlp(CPL, 1, ido=True, requester_id=9, completer_id=5), write)
    assert may_pass(tlp(CPL, 1, ido=True, requester_id=5, completer_id=6), write)


def test_a_write_gets_past_a_read_stalled_for_a_tag() -> None:
    q = EgressQueue()
    read, write, read2 = tlp(NP, 0), tlp(P, 1), tlp(NP, 2)
    for t in (read, write, read2):
        q.push(t)
    issued = q.issue(lambda t: t.cls is P)
    assert issued == [write]
    assert len(q) == 2


def test_a_held_write_holds_the_reads_behind_it_but_not_relaxed_traffic() -> None:
    q = EgressQueue()
    held = tlp(P, 0, requester_id=0)
    plain_read = tlp(NP, 1, requester_id=1)
    ido_read = tlp(NP, 2, requester_id=1, ido=True)
    same_id_ido_read = tlp(NP, 3, requester_id=0, ido=True)
    ro_write = tlp(P, 4, ro=True)
    for t in (held, plain_read, ido_read, same_id_ido_read, ro_write):
        q.push(t)
    issued = q.issue(lambda t: t is not held)
    assert issued == [ido_read, ro_write]
    assert q.issue(lambda t: True) == [held, plain_read, same_id_ido_read]


classes = st.sampled_from([P, NP, CPL])
tlps = st.builds(
    lambda cls, rid, ro, ido, tr: (cls, rid, ro, ido, tr),
    classes,
    st.integers(0, 2),
    st.booleans(),
    st.booleans(),
    st.integers(0, 3),
)


@given(st.lists(tlps, max_size=12), st.lists(st.booleans(), min_size=12, max_size=12))
def test_nothing_issued_overtakes_a_kept_tlp_it_may_not_pass(
    specs: list[tuple], ready: list[bool]
) -> None:
    q = EgressQueue()
    queued = []
    for i, (cls, rid, ro, ido, tr) in enumerate(specs):
        t = Tlp(i, cls, requester_id=rid, ro=ro, ido=ido, completer_id=rid + 1, transaction=tr)
        queued.append(t)
        q.push(t)
    issued = q.issue(lambda t: ready[t.txn_id])
    issued_ids = {t.txn_id for t in issued}
    kept = [t for t in queued if t.txn_id not in issued_ids]
    for t in issued:
        assert ready[t.txn_id]
        assert all(may_pass(t, k) for k in kept if k.txn_id < t.txn_id)
    # Whatever was ready and held back was held by a kept TLP ahead of it.
    for t in kept:
        if ready[t.txn_id]:
            assert any(not may_pass(t, k) for k in kept if k.txn_id < t.txn_id)


@pytest.mark.parametrize("arrival", list(itertools.permutations(range(4))))
def test_rob_releases_in_issue_order_whatever_the_completion_order(
    arrival: tuple[int, ...],
) -> None:
    rob = ReorderBuffer(4)
    tags = [rob.allocate(txn) for txn in range(4)]
    released: list[int] = []
    done: set[int] = set()
    for k in arrival:
        done.add(k)
        released += rob.complete(tags[k])
        prefix = 0
        while prefix in done:
            prefix += 1
        assert released == list(range(prefix))
        assert rob.free == len(released)
    assert released == [0, 1, 2, 3]


def test_rob_full_refuses_and_a_tag_frees_only_at_release() -> None:
    rob = ReorderBuffer(2)
    first = rob.allocate(10)
    second = rob.allocate(11)
    with pytest.raises(RobFullError):
        rob.allocate(12)
    assert rob.complete(second) == []
    assert rob.free == 0
    assert rob.complete(first) == [10, 11]
    assert rob.free == 2
    with pytest.raises(ValueError, match="not outstanding"):
        rob.complete(first)

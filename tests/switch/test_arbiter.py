"""Hand-checked cases of the arbiters and allocators in ``sitssim.switch.arbiter``."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from sitssim.switch.arbiter import (
    ISlipAllocator,
    QuotaWeightedArbiter,
    RoundRobinAllocator,
    RoundRobinArbiter,
    smooth_slot_table,
)


def full_load(n: int) -> list[tuple[int, int]]:
    return list(itertools.product(range(n), range(n)))


# --- RoundRobinArbiter ---------------------------------------------------------------


def test_round_robin_grants_at_or_after_the_pointer_and_moves_past_the_winner() -> None:
    arb = RoundRobinArbiter(4)
    assert arb.grant({1, 3}) == 1
    assert arb.pointer == 2
    assert arb.grant({1, 3}) == 3
    assert arb.pointer == 0  # wraps past the last requester
    assert arb.grant({1, 3}) == 1
    assert arb.grant({0, 1}) == 0  # pointer 2: nobody at or after it, so wrap to 0


def test_round_robin_winner_at_the_pointer_itself_wins() -> None:
    arb = RoundRobinArbiter(3)
    arb.advance_past(0)
    assert arb.grant({0, 1, 2}) == 1


def test_peek_and_an_empty_request_leave_the_pointer_alone() -> None:
    arb = RoundRobinArbiter(4)
    arb.advance_past(1)
    assert arb.peek({0, 3}) == 3
    assert arb.pointer == 2
    assert arb.grant(set()) is None
    assert arb.pointer == 2


def test_round_robin_serves_every_continuous_requester_once_per_cycle() -> None:
    arb = RoundRobinArbiter(5)
    wins = [arb.grant({0, 2, 4}) for _ in range(9)]
    assert wins == [0, 2, 4] * 3


def test_priority_takes_precedence_and_the_pointer_breaks_ties() -> None:
    arb = RoundRobinArbiter(4)
    arb.advance_past(2)  # pointer at 3
    assert arb.grant({0, 1, 2}, priority={1: 2, 2: 2}) == 1
    assert arb.pointer == 2
    assert arb.grant({0, 1, 2}, priority={1: 2, 2: 2}) == 2
    assert arb.grant({0, 3}, priority={0: 1}) == 0  # unlisted requesters have priority 0


def test_round_robin_refuses_out_of_range_requesters() -> None:
    arb = RoundRobinArbiter(2)
    with pytest.raises(ValueError, match="outside"):
        arb.grant({2})
    with pytest.raises(ValueError, match="outside"):
        arb.advance_past(-1)
    with pytest.raises(ValueError):
        RoundRobinArbiter(0)


# --- QuotaWeightedArbiter ------------------------------------------------------------


def test_slot_table_interleaves_by_smooth_weighted_round_robin() -> None:
    assert smooth_slot_table([3, 1]) == (0, 0, 1, 0)
    assert smooth_slot_table([16, 16, 16, 16, 0, 0, 0, 0])[:8] == (0, 1, 2, 3) * 2
    assert smooth_slot_table([1, 1, 1]) == (0, 1, 2)
    table = smooth_slot_table([2, 3, 5])
    assert Counter(table) == {0: 2, 1: 3, 2: 5}
    assert all(a != b for a, b in itertools.pairwise(t for t in table if t != 2))


def test_quota_walk_skips_non_requesters_and_resumes_after_the_winner() -> None:
    arb = QuotaWeightedArbiter([3, 1])  # table (0, 0, 1, 0)
    assert arb.grant({0, 1}) == 0
    assert arb.position == 1
    assert arb.grant({1}) == 1  # skips slot 1 (owner 0 not requesting)
    assert arb.position == 3
    assert arb.grant({0, 1}) == 0
    assert arb.position == 0
    assert arb.peek({1}) == 1
    assert arb.position == 0


def test_quota_share_equals_slots_over_requesting_slots() -> None:
    arb = QuotaWeightedArbiter([2, 3, 5])
    wins = Counter(arb.grant({0, 2}) for _ in range(7 * 100))
    assert wins == {0: 200, 2: 500}


def test_spec_seed_table_gives_equal_shares_to_its_four_vcs() -> None:
    arb = QuotaWeightedArbiter([16, 16, 16, 16, 0, 0, 0, 0])
    assert arb.frame == 64
    wins = Counter(arb.grant(range(8)) for _ in range(640))
    assert wins == {0: 160, 1: 160, 2: 160, 3: 160}


def test_quota_shares_follow_the_table_over_a_busy_period() -> None:
    arb = QuotaWeightedArbiter([12, 12, 12, 12, 12, 4])
    wins = Counter(arb.grant(range(6)) for _ in range(64 * 50))
    assert [wins[k] for k in range(6)] == [600] * 5 + [200]


def test_a_requester_without_slots_is_never_granted() -> None:
    arb = QuotaWeightedArbiter([4, 0])
    assert arb.grant({1}) is None
    assert all(arb.grant({0, 1}) == 0 for _ in range(10))


def test_an_over_quota_table_still_runs() -> None:
    """The 64-slot frame is the clause's limit (``switch.vc_quota``), not the arbiter's."""
    arb = QuotaWeightedArbiter([16, 16, 16, 16, 6])
    assert arb.frame == 70
    wins = Counter(arb.grant(range(5)) for _ in range(700))
    assert wins[4] == 60


@pytest.mark.parametrize("slots", [[], [0, 0], [3, -1]])
def test_quota_arbiter_refuses_an_unusable_table(slots: list[int]) -> None:
    with pytest.raises(ValueError):
        QuotaWeightedArbiter(slots)


# --- iSLIP ----------------------------------------------------------------------------


def test_islip_first_round_pointer_updates_on_a_2x2() -> None:
    alloc = ISlipAllocator(2, 2)
    # Both outputs grant input 0, which accepts output 0; output 1's grant is refused,
    # so only output 0's grant pointer and input 0's accept pointer move.
    assert alloc.allocate(full_load(2)) == {0: 0}
    assert alloc.output_pointers == (1, 0)
    assert alloc.input_pointers == (1, 0)
    assert alloc.allocate(full_load(2)) == {0: 1, 1: 0}
    assert alloc.output_pointers == (0, 1)
    assert alloc.input_pointers == (0, 1)
    assert alloc.allocate(full_load(2)) == {0: 0, 1: 1}


def test_islip_moves_pointers_only_in_the_first_iteration() -> None:
    alloc = ISlipAllocator(2, 2, iterations=2)
    assert alloc.allocate(full_load(2)) == {0: 0, 1: 1}
    # The second iteration matched (1, 1) but must not move output 1's or input 1's pointer.
    assert alloc.output_pointers == (1, 0)
    assert alloc.input_pointers == (1, 0)


def test_islip_desynchronises_to_full_throughput_on_a_4x4() -> None:
    alloc = ISlipAllocator(4, 4)
    sizes = [len(alloc.allocate(full_load(4))) for _ in range(40)]
    assert sizes[:4] == [1, 2, 3, 4]
    assert sizes[4:] == [4] * 36
    assert sorted(alloc.output_pointers) == [0, 1, 2, 3]


def test_islip_to_convergence_matches_fully_from_the_first_round() -> None:
    alloc = ISlipAllocator(4, 4, iterations=None)
    assert [len(alloc.allocate(full_load(4))) for _ in range(5)] == [4] * 5


def test_islip_grants_follow_the_grant_pointer() -> None:
    alloc = ISlipAllocator(3, 2)
    assert alloc.allocate([(1, 0), (2, 0), (2, 1)]) == {1: 0, 2: 1}
    assert alloc.output_pointers == (2, 0)
    assert alloc.allocate([(1, 0), (2, 0)]) == {2: 0}
    assert alloc.output_pointers == (0, 0)


# --- RoundRobinAllocator ------------------------------------------------------------


def test_one_separable_pass_can_miss_a_free_pair_that_convergence_finds() -> None:
    requests = [(0, 0), (0, 1), (1, 0), (1, 1)]
    # Both inputs choose output 0 (pointers at 0); output 0 takes input 0.
    assert RoundRobinAllocator(2, 2, iterations=1).allocate(requests) == {0: 0}
    assert RoundRobinAllocator(2, 2).allocate(requests) == {0: 0, 1: 1}


def test_input_first_round_moves_both_pointers_past_the_match() -> None:
    alloc = RoundRobinAllocator(3, 3, iterations=1)
    assert alloc.allocate([(0, 1), (2, 1), (2, 2)]) == {0: 1}
    assert alloc.input_pointers == (2, 0, 0)
    assert alloc.output_pointers == (0, 1, 0)
    # Input 2 still chooses output 1 (its pointer did not move), and output 1 now
    # prefers input 2.
    assert alloc.allocate([(0, 1), (2, 1), (2, 2)]) == {2: 1}


def test_output_first_round_robin_allocator_is_one_iteration_islip() -> None:
    rr = RoundRobinAllocator(4, 3, input_first=False, iterations=1)
    islip = ISlipAllocator(4, 3)
    for t in range(6):
        requests = [(i, o) for i in range(4) for o in range(3) if (i * 3 + o + t) % 3]
        assert rr.allocate(requests) == islip.allocate(requests)


def test_priority_wins_at_both_steps() -> None:
    requests = [(0, 0), (1, 0), (1, 1)]
    assert ISlipAllocator(2, 2).allocate(requests, priority={(1, 0): 1}) == {1: 0}
    assert RoundRobinAllocator(2, 2).allocate(requests, priority={(1, 0): 1}) == {1: 0}
    assert RoundRobinAllocator(2, 2).allocate(requests) == {0: 0, 1: 1}


def test_allocators_refuse_bad_shapes_and_requests() -> None:
    with pytest.raises(ValueError, match="iterations"):
        ISlipAllocator(2, 2, iterations=0)
    with pytest.raises(ValueError, match="ports"):
        RoundRobinAllocator(0, 2)
    with pytest.raises(ValueError, match="output 2"):
        ISlipAllocator(2, 2).allocate([(0, 2)])
    with pytest.raises(ValueError, match="input -1"):
        RoundRobinAllocator(2, 2).allocate([(-1, 0)])


def test_mask_requests_allocate_as_pairs_do() -> None:
    by_pairs = ISlipAllocator(3, 4, iterations=2)
    by_masks = ISlipAllocator(3, 4, iterations=2)
    for t in range(8):
        pairs = [(i, o) for i in range(3) for o in range(4) if (i + 2 * o + t) % 3]
        masks = [sum(1 << o for i2, o in pairs if i2 == i) for i in range(3)]
        assert by_masks.allocate_masks(masks) == by_pairs.allocate(pairs)
    with pytest.raises(ValueError, match="outside"):
        by_masks.allocate_masks([0, 1 << 4, 0])
    with pytest.raises(ValueError, match="3 request masks"):
        by_masks.allocate_masks([0, 0])

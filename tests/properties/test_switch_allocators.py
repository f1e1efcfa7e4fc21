"""Property tests of the crossbar allocators in ``sitssim.switch.arbiter``.

Checks, from any pointer state (reached by a random history of allocations):
- every allocator's grants form a valid matching of the requests (each granted pair was
  requested, no input or output granted twice);
- the separable round-robin allocator (either side first) and iSLIP run to convergence
  give a maximal matching: no request left whose input and output are both unmatched;
- iSLIP with k iterations gives a valid matching that contains the one k - 1 iterations
  give from the same state (later iterations only add, and pointers move only in the
  first);
- round-robin allocation is starvation-free (stateful): a request held continuously, with
  requests of the others arriving at will and leaving only when served, is served within
  ``n_inputs * n_outputs * max(n_inputs, n_outputs)`` rounds.

The bound: while an output's pointer has not reached a waiting input it moves only
forward and only when a grant is used, so it passes at most ``n_inputs - 1`` others; at one
pointer position the first requester at or after it changes only to an earlier one, at
most ``n_inputs`` times, and a fixed requester refuses the output at most
``n_outputs - 1`` times, since each refusal moves its own pointer strictly towards that
output. The input-first allocator has the same argument with the sides swapped.
"""

from __future__ import annotations

import copy
import itertools

from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from properties.budget import examples

from sitssim.switch.arbiter import Allocator, ISlipAllocator, RoundRobinAllocator

Pair = tuple[int, int]

KINDS = ("rr_input_first", "rr_output_first", "islip")


def make(kind: str, n_in: int, n_out: int, iterations: int | None) -> Allocator:
    if kind == "islip":
        return ISlipAllocator(n_in, n_out, iterations=iterations)
    return RoundRobinAllocator(
        n_in, n_out, input_first=kind == "rr_input_first", iterations=iterations
    )


@st.composite
def request_sets(
    draw: st.DrawFn, n_in: int, n_out: int, densities: tuple[float, ...] = (0.15, 0.35, 0.6, 1.0)
) -> frozenset[Pair]:
    """Requests drawn at a density of its own, sparse to full, so matchings come out both
    perfect and partial and some requests go unmatched."""
    density = draw(st.sampled_from(densities))
    pairs = list(itertools.product(range(n_in), range(n_out)))
    keep = draw(st.lists(st.floats(0, 1), min_size=len(pairs), max_size=len(pairs)))
    return frozenset(p for p, u in zip(pairs, keep, strict=True) if u < density)


@st.composite
def scenes(
    draw: st.DrawFn, iterations: st.SearchStrategy[int | None]
) -> tuple[Allocator, frozenset[Pair]]:
    """An allocator in a random pointer state, and the requests of the round to check."""
    n_in = draw(st.integers(1, 6))
    n_out = draw(st.integers(1, 6))
    alloc = make(draw(st.sampled_from(KINDS)), n_in, n_out, draw(iterations))
    for _ in range(draw(st.integers(0, 6))):
        alloc.allocate(draw(request_sets(n_in, n_out)))
    return alloc, draw(request_sets(n_in, n_out))


def assert_valid_matching(matching: dict[int, int], requests: frozenset[Pair]) -> None:
    assert all((i, o) in requests for i, o in matching.items()), (matching, requests)
    assert len(set(matching.values())) == len(matching), matching


def unmatched_free_requests(matching: dict[int, int], requests: frozenset[Pair]) -> list[Pair]:
    taken = set(matching.values())
    return [(i, o) for i, o in requests if i not in matching and o not in taken]


def classify(matching: dict[int, int], requests: frozenset[Pair]) -> None:
    inputs = {i for i, _ in requests}
    if not requests:
        event("no requests")
    elif len(matching) == len(inputs):
        event("every requesting input matched")
    else:
        event("some requesting input unmatched")


@given(scenes(st.sampled_from((1, 2, 3, None))))
def test_grants_form_a_valid_matching(scene: tuple[Allocator, frozenset[Pair]]) -> None:
    alloc, requests = scene
    matching = alloc.allocate(requests)
    classify(matching, requests)
    assert_valid_matching(matching, requests)


@given(scenes(st.just(None)))
def test_allocation_to_convergence_is_maximal(scene: tuple[Allocator, frozenset[Pair]]) -> None:
    alloc, requests = scene
    matching = alloc.allocate(requests)
    classify(matching, requests)
    assert_valid_matching(matching, requests)
    assert unmatched_free_requests(matching, requests) == []


@given(scenes(st.just(1)))
def test_a_single_pass_is_valid_but_not_always_maximal(
    scene: tuple[Allocator, frozenset[Pair]],
) -> None:
    alloc, requests = scene
    matching = alloc.allocate(requests)
    assert_valid_matching(matching, requests)
    event("maximal" if not unmatched_free_requests(matching, requests) else "not maximal")


@given(
    n_in=st.integers(2, 8),
    n_out=st.integers(2, 8),
    k=st.sampled_from((2, 2, 2, 3)),
    data=st.data(),
)
def test_islip_k_iterations_extends_k_minus_one(
    n_in: int, n_out: int, k: int, data: st.DataObject
) -> None:
    fewer = ISlipAllocator(n_in, n_out, iterations=k - 1)
    for _ in range(data.draw(st.integers(0, 6))):
        fewer.allocate(data.draw(request_sets(n_in, n_out)))
    more = copy.deepcopy(fewer)
    more.iterations = k
    # Later iterations matter when one pass leaves much unmatched: many ports, half full.
    requests = data.draw(request_sets(n_in, n_out, densities=(0.3, 0.5, 0.7)))
    small = fewer.allocate(requests)
    large = more.allocate(requests)
    classify(large, requests)
    assert_valid_matching(large, requests)
    assert small.items() <= large.items()
    assert fewer.input_pointers == more.input_pointers
    assert fewer.output_pointers == more.output_pointers
    event("more iterations added a match" if len(large) > len(small) else "no gain")


@settings(stateful_step_count=120)
class HeldRequests(RuleBasedStateMachine):
    """Virtual output queues in front of an allocator: a request appears when a cell
    arrives for its (input, output) and leaves only when served with no cell behind it."""

    @initialize(
        n_in=st.integers(1, 4),
        n_out=st.integers(1, 4),
        kind=st.sampled_from(KINDS),
        iterations=st.sampled_from((1, 2, None)),
    )
    def setup(self, n_in: int, n_out: int, kind: str, iterations: int | None) -> None:
        self.n_in, self.n_out = n_in, n_out
        self.alloc = make(kind, n_in, n_out, iterations)
        self.bound = n_in * n_out * max(n_in, n_out)
        self.waited: dict[Pair, int] = {}

    @rule(data=st.data())
    def cell_arrives(self, data: st.DataObject) -> None:
        pair = (data.draw(st.integers(0, self.n_in - 1)), data.draw(st.integers(0, self.n_out - 1)))
        self.waited.setdefault(pair, 0)

    @rule()
    def every_queue_fills(self) -> None:
        for pair in itertools.product(range(self.n_in), range(self.n_out)):
            self.waited.setdefault(pair, 0)

    @rule(data=st.data())
    def allocation_round(self, data: st.DataObject) -> None:
        requests = frozenset(self.waited)
        matching = self.alloc.allocate(requests)
        assert_valid_matching(matching, requests)
        for pair in requests:
            if matching.get(pair[0]) != pair[1]:
                self.waited[pair] += 1
            elif data.draw(st.booleans(), label=f"more cells behind {pair}"):
                self.waited[pair] = 0
            else:
                del self.waited[pair]

    @invariant()
    def no_request_waits_past_the_bound(self) -> None:
        longest = max(self.waited.values(), default=0)
        event(f"longest wait so far {min(longest, 4)}{'+' if longest >= 4 else ''} rounds")
        assert longest <= self.bound, (self.waited, self.bound)


TestHeldRequests = HeldRequests.TestCase


@st.composite
def uncontested_or_not(draw: st.DrawFn) -> tuple[Allocator, frozenset[Pair]]:
    """An allocator in a random pointer state, and requests that a third of the time contest
    nothing (each input one output, no output twice: a partial one-to-one map) and a third
    ask one output at most per input, outputs shared (FIFO heads)."""
    alloc, requests = draw(scenes(st.sampled_from((1, 2, None))))
    shape = draw(st.sampled_from(("any", "one-to-one", "one each")))
    if shape == "one each":
        heads = draw(
            st.lists(
                # Few outputs among the inputs (-1: no head), so that heads collide.
                st.integers(-1, (alloc.n_outputs - 1) // 2),
                min_size=alloc.n_inputs,
                max_size=alloc.n_inputs,
            )
        )
        requests = frozenset((i, o) for i, o in enumerate(heads) if o >= 0)
    elif shape == "one-to-one":
        outputs = draw(st.permutations(range(alloc.n_outputs)))
        inputs = draw(st.lists(st.booleans(), min_size=alloc.n_inputs, max_size=alloc.n_inputs))
        requests = frozenset(
            (i, o) for (i, keep), o in zip(enumerate(inputs), outputs, strict=False) if keep
        )
    return alloc, requests


@settings(max_examples=examples(300))  # about 0.02 s an example; each shape gets several dozen
@given(uncontested_or_not())
def test_the_uncontested_shortcut_allocates_and_moves_pointers_as_the_rounds_do(
    scene: tuple[Allocator, frozenset[Pair]],
) -> None:
    """``allocate_masks`` grants requests that contest nothing, or ask one output at most
    per input, without running the rounds; whatever the requests, it must give
    ``allocate``'s matching and leave every pointer where ``allocate`` leaves it."""
    alloc, requests = scene
    reference = copy.deepcopy(alloc)
    masks = [0] * alloc.n_inputs
    for i, o in requests:
        masks[i] |= 1 << o
    several = any(m & (m - 1) for m in masks)
    shared = len({o for _, o in requests}) < len(requests)
    event("several per input" if several else "shared outputs" if shared else "uncontested")
    got, expected = alloc.allocate_masks(masks), reference.allocate(requests)
    assert got == expected
    assert alloc.input_pointers == reference.input_pointers
    assert alloc.output_pointers == reference.output_pointers

"""Sans-I/O arbiters and crossbar allocators (L4): requests in, grants out.

Theory of operation
-------------------
An *arbiter* chooses one winner among the requesters of one resource; an *allocator*
matches the inputs of a crossbar to its outputs, each input granted at most one output
and each output at most one input. Neither keeps a clock or knows about messages: the
switch model asks once per allocation round (a cell time, or the allocator's pipeline
step) and crosses the crossbar with whatever it is granted.

:class:`RoundRobinArbiter` keeps a pointer. It grants the requester at or after the
pointer, cyclically; with priorities, only the requesters of the highest priority take
part and the pointer breaks the tie among them. The pointer moves to one past the winner,
and only when the winner's grant is used (:meth:`RoundRobinArbiter.grant` does both;
an allocator calls :meth:`RoundRobinArbiter.peek` and later
:meth:`RoundRobinArbiter.advance_past`). A requester that keeps asking is therefore
served within ``size`` of its arbiter's grants.

:class:`QuotaWeightedArbiter` serves a port's quota table (``switch.vc_quota``): a number
of slots per requester (a tenant or a VC). The slots are laid out once in a *slot table*
of ``sum(slots)`` entries, interleaved by smooth weighted round robin (each step every
requester earns its slots, the richest takes the step, lowest index on a tie, and pays the
total), so a requester's slots are spread over the frame rather than bunched. A grant walks
the table from the current position, skips every slot whose owner is not requesting,
grants the first owner that is, and leaves the position one slot past it. Over one walk of
the table each continuously requesting owner is granted once per slot it owns, so over a
long busy period its share is its slots over the slots of all requesting owners. A
requester with no slots is never granted. The table is taken as configured: a frame of
more than 64 slots runs, and the clause ``switch.vc_quota`` judges it.

:class:`RoundRobinAllocator` and :class:`ISlipAllocator` are separable allocators built
from one :class:`RoundRobinArbiter` per input and one per output. A round has two steps:

* *input first* (``RoundRobinAllocator`` by default): each unmatched input chooses one of
  the unmatched outputs it requests with its input arbiter; each output that was chosen
  grants one of the inputs that chose it with its output arbiter;
* *output first* (iSLIP, McKeown 1999): each unmatched output grants one of the unmatched
  inputs requesting it (grant pointer); each input that received grants accepts one
  (accept pointer).

Each pair matched becomes part of the allocation, and the round repeats over the inputs
and outputs still unmatched, ``iterations`` times or, with ``iterations=None``, until a
round adds no match. Pointers move one past the matched partner only for matches of the
first round, as iSLIP does: a match made in a later round can move a pointer past a waiting
requester, which is the path to starvation that rule closes. Whatever the pointers, a round
that adds no match leaves no request between an unmatched input and an unmatched output,
so running to convergence gives a maximal matching; one round alone need not. Under full
uniform load (every input requesting every output) iSLIP's grant pointers desynchronise
within ``n`` rounds and each later round is a perfect matching, which is how VOQs with
iSLIP reach about 100 %.

Requests are ``(input, output)`` pairs, with an optional priority per pair (higher wins at
both steps). Strict priority gives up the starvation bound for the lower priorities.
Requesters and requests are held as bit masks (bit ``k`` = index ``k``) because an
allocation runs on every cell time of every switch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = [
    "Allocator",
    "ISlipAllocator",
    "QuotaWeightedArbiter",
    "RoundRobinAllocator",
    "RoundRobinArbiter",
    "smooth_slot_table",
]

Pair = tuple[int, int]


def _mask_of(indices: Iterable[int], size: int, what: str) -> int:
    mask = 0
    for k in indices:
        if not 0 <= k < size:
            raise ValueError(f"{what} {k} is outside 0..{size - 1}")
        mask |= 1 << k
    return mask


def _top_priority(mask: int, priority_of: Callable[[int], int]) -> int:
    """The members of ``mask`` that share its highest priority."""
    best: int | None = None
    top = 0
    rest = mask
    while rest:
        low = rest & -rest
        rest ^= low
        p = priority_of(low.bit_length() - 1)
        if best is None or p > best:
            best, top = p, low
        elif p == best:
            top |= low
    return top


def _asker_is_input(asker: int, asked: int) -> Pair:
    return asker, asked


def _asker_is_output(asker: int, asked: int) -> Pair:
    return asked, asker


class RoundRobinArbiter:
    """One resource's choice among ``size`` requesters, by a round-robin pointer."""

    __slots__ = ("_pointer", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an arbiter needs at least one requester, got {size}")
        self.size = size
        self._pointer = 0

    @property
    def pointer(self) -> int:
        """The requester that wins the next tie."""
        return self._pointer

    def peek_mask(self, mask: int) -> int | None:
        """The winner among the requesters in ``mask``, without moving the pointer."""
        if not mask:
            return None
        at_or_after = mask >> self._pointer
        if at_or_after:
            return self._pointer + (at_or_after & -at_or_after).bit_length() - 1
        return (mask & -mask).bit_length() - 1

    def grant_mask(self, mask: int) -> int:
        """:meth:`grant` for requesters held as a non-empty mask (bit ``k`` = requester
        ``k``), as an allocator's hot path holds them: the winner, the pointer moved past it."""
        pointer = self._pointer
        at_or_after = mask >> pointer
        if at_or_after:
            winner = pointer + (at_or_after & -at_or_after).bit_length() - 1
        else:
            winner = (mask & -mask).bit_length() - 1
        self._pointer = winner + 1 if winner + 1 < self.size else 0
        return winner

    def peek(
        self, requesters: Iterable[int], priority: Mapping[int, int] | None = None
    ) -> int | None:
        mask = _mask_of(requesters, self.size, "requester")
        if priority is not None:
            mask = _top_priority(mask, lambda k: priority.get(k, 0))
        return self.peek_mask(mask)

    def advance_past(self, winner: int) -> None:
        """Record that ``winner``'s grant was used: it becomes the last to win a tie."""
        if not 0 <= winner < self.size:
            raise ValueError(f"requester {winner} is outside 0..{self.size - 1}")
        self._pointer = (winner + 1) % self.size

    def grant(
        self, requesters: Iterable[int], priority: Mapping[int, int] | None = None
    ) -> int | None:
        """Choose a winner and move the pointer past it (None if nobody requests)."""
        winner = self.peek(requesters, priority)
        if winner is not None:
            self._pointer = (winner + 1) % self.size
        return winner


def smooth_slot_table(slots: Sequence[int]) -> tuple[int, ...]:
    """The slot table of a quota row: ``slots[k]`` entries owned by ``k``, interleaved."""
    total = sum(slots)
    earned = [0] * len(slots)
    table: list[int] = []
    for _ in range(total):
        for k, weight in enumerate(slots):
            earned[k] += weight
        richest = max(range(len(slots)), key=lambda k: (earned[k], -k))
        earned[richest] -= total
        table.append(richest)
    return tuple(table)


class QuotaWeightedArbiter:
    """Weighted round robin by slots of a quota table (``switch.vc_quota``)."""

    __slots__ = ("_position", "size", "slots", "table")

    def __init__(self, slots: Sequence[int]) -> None:
        if not slots:
            raise ValueError("a quota table needs at least one requester")
        if any(s < 0 for s in slots):
            raise ValueError(f"slots must not be negative, got {list(slots)}")
        if sum(slots) == 0:
            raise ValueError("a quota table with no slots can grant nobody")
        self.slots = tuple(slots)
        self.size = len(slots)
        self.table = smooth_slot_table(self.slots)
        self._position = 0

    @property
    def frame(self) -> int:
        """Slots in one walk of the table."""
        return len(self.table)

    @property
    def position(self) -> int:
        """The slot the next walk starts from."""
        return self._position

    def _find(self, mask: int) -> int | None:
        table, frame = self.table, len(self.table)
        for step in range(frame):
            slot = (self._position + step) % frame
            if mask >> table[slot] & 1:
                return slot
        return None

    def peek(self, requesters: Iterable[int]) -> int | None:
        slot = self._find(_mask_of(requesters, self.size, "requester"))
        return None if slot is None else self.table[slot]

    def grant(self, requesters: Iterable[int]) -> int | None:
        """Grant the owner of the first requesting slot and move one slot past it."""
        return self.grant_mask(_mask_of(requesters, self.size, "requester"))

    def grant_mask(self, mask: int) -> int | None:
        """:meth:`grant` for requesters held as a mask (bit ``k`` = requester ``k``)."""
        slot = self._find(mask)
        if slot is None:
            return None
        self._position = (slot + 1) % len(self.table)
        return self.table[slot]


class Allocator:
    """A separable crossbar allocator of round-robin arbiters (see the module docstring)."""

    __slots__ = (
        "_in_arbiters",
        "_out_arbiters",
        "input_first",
        "iterations",
        "n_inputs",
        "n_outputs",
    )

    def __init__(
        self, n_inputs: int, n_outputs: int, *, input_first: bool, iterations: int | None
    ) -> None:
        if n_inputs < 1 or n_outputs < 1:
            raise ValueError(f"a crossbar needs ports on both sides, got {n_inputs}x{n_outputs}")
        if iterations is not None and iterations < 1:
            raise ValueError(f"iterations must be at least 1 or None, got {iterations}")
        self.n_inputs = n_inputs
        self.n_outputs = n_outputs
        self.input_first = input_first
        self.iterations = iterations
        self._in_arbiters = [RoundRobinArbiter(n_outputs) for _ in range(n_inputs)]
        self._out_arbiters = [RoundRobinArbiter(n_inputs) for _ in range(n_outputs)]

    @property
    def input_pointers(self) -> tuple[int, ...]:
        """Each input arbiter's pointer (iSLIP's accept pointers)."""
        return tuple(a.pointer for a in self._in_arbiters)

    @property
    def output_pointers(self) -> tuple[int, ...]:
        """Each output arbiter's pointer (iSLIP's grant pointers)."""
        return tuple(a.pointer for a in self._out_arbiters)

    def allocate(
        self, requests: Iterable[Pair], priority: Mapping[Pair, int] | None = None
    ) -> dict[int, int]:
        """One allocation: the matching as ``{input: output}``."""
        by_input = [0] * self.n_inputs
        by_output = [0] * self.n_outputs
        for i, o in requests:
            if not 0 <= i < self.n_inputs:
                raise ValueError(f"input {i} is outside 0..{self.n_inputs - 1}")
            if not 0 <= o < self.n_outputs:
                raise ValueError(f"output {o} is outside 0..{self.n_outputs - 1}")
            by_input[i] |= 1 << o
            by_output[o] |= 1 << i
        return self._allocate(by_input, by_output, priority)

    def allocate_masks(
        self, request_masks: Sequence[int], priority: Mapping[Pair, int] | None = None
    ) -> dict[int, int]:
        """:meth:`allocate` for requests held as masks: bit ``o`` of ``request_masks[i]`` set
        when input ``i`` requests output ``o``, as a switch keeping VOQ occupancy can."""
        if len(request_masks) != self.n_inputs:
            raise ValueError(f"expected {self.n_inputs} request masks, got {len(request_masks)}")
        for i, mask in enumerate(request_masks):
            if mask >> self.n_outputs or mask < 0:
                raise ValueError(f"input {i} requests outputs outside 0..{self.n_outputs - 1}")
        return self.allocate_valid_masks(request_masks, priority)

    def allocate_valid_masks(
        self, request_masks: Sequence[int], priority: Mapping[Pair, int] | None = None
    ) -> dict[int, int]:
        """:meth:`allocate_masks` for masks known to be valid (one per input, each within the
        outputs): a switch's own requests, checked by construction, on its hot path."""
        asked = 0
        contested = several = priority is not None
        for mask in request_masks:
            if mask & (mask - 1):
                contested = several = True
            elif mask & asked:
                contested = True
            asked |= mask
        if not contested:
            return self._grant_all(request_masks)
        if not several:
            return self._grant_one_each(request_masks)
        by_output = [0] * self.n_outputs
        for i, mask in enumerate(request_masks):
            rest = mask
            while rest:
                low = rest & -rest
                rest ^= low
                by_output[low.bit_length() - 1] |= 1 << i
        return self._allocate(list(request_masks), by_output, priority)

    def _grant_all(self, request_masks: Sequence[int]) -> dict[int, int]:
        """The allocation of requests that contest nothing: each input asks for one output
        and no output is asked twice. Every such request is matched in the first round,
        by either step, with each pointer moved one past its partner, and no later round
        adds anything; this is that outcome without the rounds (a switch's usual case:
        one head cell per input, few collisions)."""
        matching: dict[int, int] = {}
        for i, mask in enumerate(request_masks):
            if mask:
                o = mask.bit_length() - 1
                matching[i] = o
                self._in_arbiters[i].advance_past(o)
                self._out_arbiters[o].advance_past(i)
        return matching

    def _grant_one_each(self, request_masks: Sequence[int]) -> dict[int, int]:
        """The allocation when every input asks for one output at most (FIFO inputs' heads),
        some outputs asked by several: :meth:`grant_askers` over the outputs asked."""
        askers = [0] * self.n_outputs
        asked = 0
        for i, mask in enumerate(request_masks):
            if mask:
                askers[mask.bit_length() - 1] |= 1 << i
                asked |= mask
        return dict(self.grant_askers(askers, asked))

    def grant_askers(self, askers: Sequence[int], outputs: int) -> list[Pair]:
        """The allocation when every input asks for one output at most, held by output:
        ``askers[o]`` the inputs (bits) asking output ``o``, for each output in ``outputs``
        (bits; each with an asker). Either way round, the first round's outcome is each
        asked output's arbiter choosing among its askers (an input's own arbiter has one
        output to choose, and an input can be granted by one output only), pointers moved
        one past the partner; a later round adds nothing, since a loser's one output is
        taken. The pairs ``(input, output)`` come in output order. A switch whose inputs are
        FIFOs of one VC keeps ``askers`` as its heads change, so that an allocation costs
        what it grants rather than a pass over every input."""
        won: list[Pair] = []
        in_arbiters = self._in_arbiters
        out_arbiters = self._out_arbiters
        n_out = self.n_outputs
        rest = outputs
        while rest:
            low = rest & -rest
            rest ^= low
            o = low.bit_length() - 1
            mask = askers[o]
            if mask & (mask - 1):
                i = out_arbiters[o].grant_mask(mask)
            else:
                # One asker wins whatever the pointer: it moves one past it.
                i = mask.bit_length() - 1
                out_arbiters[o]._pointer = i + 1 if i + 1 < self.n_inputs else 0
            # The input's arbiter has this one output to choose.
            in_arbiters[i]._pointer = o + 1 if o + 1 < n_out else 0
            won.append((i, o))
        return won

    def _allocate(
        self, by_input: list[int], by_output: list[int], priority: Mapping[Pair, int] | None
    ) -> dict[int, int]:
        matching: dict[int, int] = {}
        free_in = (1 << self.n_inputs) - 1
        free_out = (1 << self.n_outputs) - 1
        first = True
        rounds = 0
        while self.iterations is None or rounds < self.iterations:
            if self.input_first:
                added = self._round(
                    by_input,
                    free_in,
                    free_out,
                    self._in_arbiters,
                    self._out_arbiters,
                    priority,
                    first,
                    _asker_is_input,
                )
            else:
                added = self._round(
                    by_output,
                    free_out,
                    free_in,
                    self._out_arbiters,
                    self._in_arbiters,
                    priority,
                    first,
                    _asker_is_output,
                )
            if not added:
                break
            for i, o in added:
                matching[i] = o
                free_in &= ~(1 << i)
                free_out &= ~(1 << o)
            first = False
            rounds += 1
        return matching

    @staticmethod
    def _round(
        asks: list[int],
        free_askers: int,
        free_asked: int,
        asker_arbiters: list[RoundRobinArbiter],
        asked_arbiters: list[RoundRobinArbiter],
        priority: Mapping[Pair, int] | None,
        first: bool,
        pair: Callable[[int, int], Pair],
    ) -> list[Pair]:
        """One round of two steps, either way round: each free asker picks one free side it
        asks for with its arbiter (inputs their outputs, or iSLIP's outputs their grants);
        each side picked takes one of its pickers with its arbiter. ``pair(asker, asked)``
        is the (input, output) pair; the matches come in the asked side's order."""
        picked_by = [0] * len(asked_arbiters)
        rest = free_askers
        while rest:
            low = rest & -rest
            rest ^= low
            a = low.bit_length() - 1
            wanted = asks[a] & free_asked
            if priority is not None:
                wanted = _top_priority(wanted, lambda b, a=a: priority.get(pair(a, b), 0))
            b = asker_arbiters[a].peek_mask(wanted)
            if b is not None:
                picked_by[b] |= low
        added: list[Pair] = []
        for b, pickers in enumerate(picked_by):
            if priority is not None:
                pickers = _top_priority(pickers, lambda a, b=b: priority.get(pair(a, b), 0))
            a = asked_arbiters[b].peek_mask(pickers)
            if a is None:
                continue
            added.append(pair(a, b))
            if first:
                asker_arbiters[a].advance_past(b)
                asked_arbiters[b].advance_past(a)
        return added


class RoundRobinAllocator(Allocator):
    """Separable round-robin allocator, input first by default, run to convergence."""

    __slots__ = ()

    def __init__(
        self,
        n_inputs: int,
        n_outputs: int,
        *,
        input_first: bool = True,
        iterations: int | None = None,
    ) -> None:
        super().__init__(n_inputs, n_outputs, input_first=input_first, iterations=iterations)


class ISlipAllocator(Allocator):
    """McKeown's iSLIP: grant, then accept; ``iterations=None`` runs to convergence."""

    __slots__ = ()

    def __init__(self, n_inputs: int, n_outputs: int, iterations: int | None = 1) -> None:
        super().__init__(n_inputs, n_outputs, input_first=False, iterations=iterations)

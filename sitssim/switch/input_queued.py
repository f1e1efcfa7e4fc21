"""An input-queued switch: bounded input buffers, a crossbar allocator, speedup 1.

Theory of operation
-------------------
A message that crosses an input port into the switch (after the switch's fixed latency,
which the upstream port charges on the arrival event) is routed once, on arrival, and
waits in that input's buffer for its virtual channel (the engine's ``vc`` column); the
switch delivers at once what is addressed to itself. Each (input, VC) buffer holds
``input_buffer`` messages, as one FIFO or, with virtual output queues, one FIFO per output
sharing them; upstream credits are pooled per (VC, class) to match. An input's request for
an output stands for every VC head there that wants it; when the output is granted, one
of those heads crosses, chosen by the input port's quota slots per VC with
``vc_arbiter: quota_weighted`` (``vc_slots``), else in turn (round robin, from one past the
VC that crossed last), so a VC whose head is blocked holds back no other VC. Upstream
credits (``hold`` on arrival, ``release`` when the message crosses) should keep a buffer
from overflowing, so an arrival into a full buffer is an
:class:`~sitssim.errors.InvariantViolation`; without credits the bound is only checked.

The crossbar has speedup 1 at message granularity: at an allocation instant each input
requests the outputs it has a message for (its FIFO's head, or every non-empty VOQ) among
the outputs that are free, the allocator (``sitssim.switch.arbiter``) grants a matching,
and each granted message starts on its output at once. The next allocation is made when
a granted output is free again, so a matching is made every cell time while the switch is
backlogged and allocation overlaps transfer: the switch's arbitration latency is its
pipeline delay, charged once per message on arrival, never per matching. This is the
setting of Karol, Hluchyj and Morgan's head-of-line blocking result (FIFO inputs saturate
at 0.750, 0.655, 0.618 for N = 2, 4, 8) and of McKeown's VOQs with iSLIP (about 100 %).

The switch keeps one pending wake-up: an arrival that gives an input a new request asks
for an allocation when its output is free (now, if it is), and an allocation that leaves
messages waiting asks for the earliest time an output they want is free. A wake-up
superseded by an earlier one is ignored. A wake-up is stepped after every ordinary event
due at its time (``AFTER_ARRIVALS``), whenever it was scheduled, so that every message
arriving at that instant takes part in the matching, and none is left to the next cell
time for having been scheduled later. An arrival that asks for an allocation now, when no
other event is due now, allocates at once instead: that wake-up would have been the next
event, and nothing could have changed the switch before it.

An output with credits towards the next node (a :class:`CreditedPort`) is requested only
by heads whose credits are there (``CreditLink.fits``); a head refused for credit starts
its class's stall there, as at an output-queued port, and is asked again when the next
UpdateFC the port knows of arrives, or when the port tells the switch of one it did not
know of (``credit_back``: the port's far buffer released a message). The crossing itself
takes the credits through the port's ``send``, the one grant. The switch's own traffic
(clock sync) enters the crossbar through a management input of its own, so every message
an output carries went through the allocator and no output keeps a queue of its own.

Ports are numbered in the order they first carry a message through the switch (the
transport builds nodes before ports), and the allocator is rebuilt each time a new one
appears, which happens only until every port has been used.

On a fabric of one VC whose switch outputs have no credits, FIFO inputs are built as
:class:`OneVcFifoSwitch` (``for_fabric``): the same matchings, less the bookkeeping of
several VCs per input and of heads short of credit, which such a fabric cannot have. Nothing
another switch's allocation does can change such a switch at that instant, so it also
allocates at once when only other allocations (or the watchdog) are due now.

Recording
---------
The switch records what its tables (``sitssim.switch.tables``: ``vc``, ``vc_tenants``,
``vc_occupancy``, ``switch_arbitration``, ``switch_crossings``) are built from after the
run. The recording is always on and kept off the hot path's critical work: five numbers
appended per message crossing, two counters per allocation, no test per message.

* ``log``: one record per message that crossed, flat, five numbers each: ``(t_in, t_out,
  input, msg, output)``, when it entered input ``input``'s buffer, when it crossed, and
  the output it crossed to. The arrival time rides in the queue entry, so an arrival
  appends nothing. The message's VC is the engine's ``vc`` column (a message keeps its
  VC end to end), so the record need not carry it. Every occupancy change of each
  (input, VC) buffer is one of these two times (arrivals at an instant come before its
  crossings: the allocation runs after them, at ``AFTER_ARRIVALS``), so its occupancy
  over time, its peak (``peak`` is the maximum over an input's VCs), its waits and the
  crossings per (input, output) are replayed from the log; :meth:`waiting` gives the
  messages still buffered, which have no record. About 40 bytes of list per crossing,
  plus the times it keeps alive.
* ``allocations``: allocations made (each wake-up that ran a matching).
* ``requests``: inputs requesting (a head for a free output) at those allocations;
  an input's request stands for all its heads, so an allocation grants it at most one.
* ``refused``: of those, inputs whose every request was dropped for want of credit (each
  head asking was short of its credits, the point where the output's ``CreditLink``
  records the stall). The grants are the crossings; the other requests went unmatched
  for want of an output: the allocator gave the input none (the outputs it asked for
  went to other inputs, or, with too few rounds, were left unmatched).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from heapq import heappush
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from simpy.events import NORMAL

from sitssim.errors import InvariantViolation
from sitssim.fabric.nodes import Node, RoutingFunction
from sitssim.fabric.ports import CreditedPort, Hop, OutputPort, callbacks_of
from sitssim.switch.arbiter import (
    Allocator,
    ISlipAllocator,
    QuotaWeightedArbiter,
    RoundRobinAllocator,
)

if TYPE_CHECKING:
    import simpy

    from sitssim.scenario import SwitchParams

AFTER_ARRIVALS = NORMAL + 1
"""The SimPy priority of an allocation: after the arrivals (``NORMAL``) due at its time."""
REPLICA = "replica"
"""The key of the replication engine's inputs, with their output (``inject_replica``)."""

AllocatorFactory = Callable[[int, int, int], Allocator]

ALLOCATORS: dict[str, AllocatorFactory] = {
    "round_robin": lambda n_in, n_out, k: RoundRobinAllocator(n_in, n_out, iterations=k),
    "islip": lambda n_in, n_out, k: ISlipAllocator(n_in, n_out, iterations=k),
}


class InputQueuedSwitch(Node):
    """An input-queued switch (module docstring).

    A subclass made by :func:`input_queued_model` fixes the parameters as class attributes,
    since the transport builds every switch with ``Node``'s signature. ``peak[i]`` is the
    most messages one VC's buffer of input ``i`` (``in_ports[i]``) has held at once, the
    quantity ``input_buffer`` bounds.
    """

    voq: ClassVar[bool] = False
    input_buffer: ClassVar[int] = 1024
    iterations: ClassVar[int] = 1
    allocator: ClassVar[str] = "round_robin"
    vc_slots: ClassVar[Mapping[int, tuple[int, ...]]] = MappingProxyType({})
    """Per channel into the switch, the slots per VC its port's quota table gives: set
    (``switch_model``) for quota-weighted VC arbitration; empty: the VCs take turns."""
    allocates_ahead_of: ClassVar[float] = math.inf
    """The earliest SimPy priority of the events due now that an allocation an arrival asks
    for may go ahead of (``_allocate_at``): none here, since another switch's allocation
    may return credits this one's outputs wait for."""

    __slots__ = (
        "_allocator",
        "_askers",
        "_credit_wait",
        "_credited",
        "_eid",
        "_holds",
        "_in_index",
        "_masks",
        "_occupancy",
        "_out_index",
        "_push",
        "_queue",
        "_queues",
        "_several",
        "_vc_arbiters",
        "_vc_masks",
        "_vc_next",
        "_wake_at",
        "_wanted",
        "_woken_cbs",
        "allocations",
        "in_ports",
        "log",
        "out_ports",
        "peak",
        "refused",
        "requests",
    )

    def __init__(
        self,
        index: int,
        name: str,
        latency_ns: float,
        routing: RoutingFunction,
        dst: list[int],
        deliver: Callable[[int], None],
        env: simpy.Environment,
        *,
        vc: list[int] | None = None,
    ) -> None:
        super().__init__(index, name, latency_ns, routing, dst, deliver, env, vc=vc)
        # in_ports[i] is None for the switch's own inputs: the management input (``inject``)
        # and the replication engine's, one per output (``inject_replica``).
        self.in_ports: list[OutputPort | None] = []
        self.out_ports: list[OutputPort] = []
        self.peak: list[int] = []
        self.log: list[float] = []
        self.allocations = 0
        self.requests = 0
        self.refused = 0
        self._in_index: dict[Hashable, int] = {}
        self._out_index: dict[OutputPort, int] = {}
        # _queues[i][vc][q]: FIFO mode has one queue per (input, VC) (q = 0) holding
        # (msg, output, arrival time); VOQ mode one per output, holding the same, so both
        # drain alike. VCs are added as messages of them first arrive.
        self._queues: list[list[list[deque[tuple[int, int, float]]]]] = []
        self._occupancy: list[list[int]] = []
        # Bit o of _vc_masks[i][vc]: that VC of input i has a message for output o at a
        # queue head; _masks[i] is their union, input i's request.
        self._vc_masks: list[list[int]] = []
        self._masks: list[int] = []
        # The same requests by output: bit i of _askers[o] is bit o of _masks[i]; bit o of
        # _wanted: _askers[o] is not empty. Kept as heads change, so that an allocation
        # looks at the outputs asked for, not at every input.
        self._askers: list[int] = []
        self._wanted = 0
        # Some input has asked for two outputs at once (VOQs, or heads of several VCs): from
        # then on an allocation takes the allocator's general path, not one grant per output.
        self._several = self.voq
        self._vc_next: list[int] = []
        self._vc_arbiters: list[QuotaWeightedArbiter | None] = []
        self._allocator: Allocator | None = None
        # Bit o: output o has credits towards the next node; of those, the ones a head was
        # refused for at the last allocation, with no return known then.
        self._credited = 0
        self._credit_wait = 0
        # Bit i: input i's port accounts the buffer behind it (``hold`` and ``release`` do
        # something: it has credits); the other inputs' ports are not called for it.
        self._holds = 0
        self._wake_at = math.inf
        self._queue = env._queue
        self._eid = env._eid
        self._push = heappush
        self._woken_cbs = callbacks_of(self._woken)

    @classmethod
    def for_fabric(cls, *, one_vc: bool, credited_outputs: bool) -> type[Node]:
        """FIFO inputs on a fabric of one VC whose switch outputs have no credits: this class
        with :class:`OneVcFifoSwitch`'s hot path behind it (its parameters and overrides
        kept)."""
        if cls.voq or not one_vc or credited_outputs or issubclass(cls, OneVcFifoSwitch):
            return cls
        return type(f"OneVcFifo{cls.__name__}", (cls, OneVcFifoSwitch), {"__slots__": ()})

    # --- numbering ---------------------------------------------------------------

    def _input(self, port: OutputPort | None, key: Hashable = None) -> int:
        """The index of the input behind ``port`` (None: one of the switch's own, told apart
        by ``key``), numbered as it is first seen."""
        k = port if key is None else key
        i = self._in_index.get(k)
        if i is None:
            i = self._in_index[k] = len(self.in_ports)
            self.in_ports.append(port)
            if port is not None and type(port).hold is not OutputPort.hold:
                self._holds |= 1 << i
            self.peak.append(0)
            self._occupancy.append([])
            self._vc_masks.append([])
            self._masks.append(0)
            self._vc_next.append(0)
            slots = self.vc_slots.get(port.channel) if port is not None else None
            self._vc_arbiters.append(QuotaWeightedArbiter(slots) if slots and any(slots) else None)
            self._queues.append([])
            self._resize()
        return i

    def _lanes(self, i: int, vc: int) -> list[deque[tuple[int, int, float]]]:
        """The queues of input ``i``'s VC ``vc``, made (with those of the VCs below it) when
        a message of it first arrives."""
        queues = self._queues[i]
        while len(queues) <= vc:
            queues.append([deque() for _ in range(len(self.out_ports) if self.voq else 1)])
            self._occupancy[i].append(0)
            self._vc_masks[i].append(0)
        return queues[vc]

    def _output(self, port: OutputPort) -> int:
        o = self._out_index.get(port)
        if o is None:
            o = self._out_index[port] = len(self.out_ports)
            self.out_ports.append(port)
            self._askers.append(0)
            if isinstance(port, CreditedPort):
                self._credited |= 1 << o
                port.feeder = self
            if self.voq:
                for queues in self._queues:
                    for lanes in queues:
                        lanes.append(deque())
            self._resize()
        return o

    def _resize(self) -> None:
        if self.in_ports and self.out_ports:
            self._allocator = ALLOCATORS[self.allocator](
                len(self.in_ports), len(self.out_ports), self.iterations
            )

    # --- arrival -----------------------------------------------------------------

    def arrive(self, msg: int, in_port: OutputPort) -> None:
        """``msg`` has crossed ``in_port`` into this switch: deliver it, or buffer it."""
        if self._dst[msg] == self.index:
            self.take(msg, in_port)
            return
        # Once per message per switch: the numbering, the VC's queues and the wake-up are
        # looked up here, and their slow paths (a first port, a first VC) called only then.
        i = self._in_index.get(in_port)
        if i is None:
            i = self._input(in_port)
        out = self.routing.route(self, msg, in_port)
        o = self._out_index.get(out)
        if o is None:
            o = self._output(out)
        vc = 0 if self._vc is None else self._vc[msg]
        queues = self._queues[i]
        lanes = queues[vc] if vc < len(queues) else self._lanes(i, vc)
        held = self._occupancy[i][vc]
        if held >= self.input_buffer:
            raise self._overflow(msg, i, in_port, vc, held)
        if self._holds >> i & 1:
            in_port.hold(msg)
        self._allocate_at(self._enqueue(msg, i, vc, lanes, o, held))

    def _overflow(
        self, msg: int, i: int, in_port: OutputPort, vc: int, held: int
    ) -> InvariantViolation:
        return InvariantViolation(
            f"switch {self.name}: message {msg} arrived at input {i} (channel "
            f"{in_port.channel}), whose VC {vc} buffer already holds {held} of "
            f"{self.input_buffer} messages"
        )

    def inject(self, msg: int) -> None:
        """The switch's own ``msg`` enters the crossbar through the management input, whose
        buffer is the switch's own memory: bounded by nothing upstream, so not checked."""
        i = self._input(None)
        self._inject_through(msg, i, self._output(self.routing.route(self, msg, None)))

    def inject_replica(self, msg: int) -> None:
        """``msg``, a copy the switch's replication engine makes (an NVLS multicast or a
        reduced sum), enters the crossbar through an input of the engine's own for its
        output: the copies of one multicast leave on all their outputs at once, as a
        crossbar that replicates sends them, not one after the other through one input."""
        o = self._output(self.routing.route(self, msg, None))
        self._inject_through(msg, self._input(None, (REPLICA, o)), o)

    def _inject_through(self, msg: int, i: int, o: int) -> None:
        vc = 0 if self._vc is None else self._vc[msg]
        lanes = self._lanes(i, vc)
        self._wake(self._enqueue(msg, i, vc, lanes, o, self._occupancy[i][vc]))

    def _enqueue(
        self,
        msg: int,
        i: int,
        vc: int,
        lanes: list[deque[tuple[int, int, float]]],
        o: int,
        held: int,
    ) -> float:
        """Buffer ``msg``; return when the switch should allocate for it (inf: the wake-up
        its input's earlier head asked for covers it)."""
        self._occupancy[i][vc] = held + 1
        if held + 1 > self.peak[i]:
            self.peak[i] = held + 1
        queue = lanes[o if self.voq else 0]
        now = self._env._now
        # The arrival time rides with the message, so that the crossing records both.
        queue.append((msg, o, now))
        if len(queue) == 1:
            # A new head is a new request: match it with whatever else arrives now, or, if
            # its output is busy, when that output is free (an allocation now could not
            # grant it, and any other request it would see has a wake-up of its own).
            bit = 1 << o
            self._vc_masks[i][vc] |= bit
            mask = self._masks[i]
            if not mask & bit:
                self._several |= mask != 0
                self._masks[i] = mask | bit
                self._askers[o] |= 1 << i
                self._wanted |= bit
            t = self.out_ports[o].free_at
            return t if t > now else now
        return math.inf

    # --- allocation --------------------------------------------------------------

    def _free_outputs(self, now: float) -> tuple[int, int, float]:
        """The outputs asked for that are free now (bits), how many inputs ask for them (each
        input asks for one output unless ``_several``: then they are counted again), and
        when the first of the others is free."""
        outs = self.out_ports
        askers = self._askers
        free = 0
        asking = 0
        busy_until = math.inf
        rest = self._wanted
        while rest:
            low = rest & -rest
            rest ^= low
            o = low.bit_length() - 1
            f = outs[o].free_at
            if f <= now:
                free |= low
                asking += askers[o].bit_count()
            elif f < busy_until:
                busy_until = f
        return free, asking, busy_until

    def _allocate(self) -> None:
        now = self._env._now
        outs = self.out_ports
        askers = self._askers
        wanted = self._wanted
        free, asking, busy_until = self._free_outputs(now)
        self.allocations += 1
        assert self._allocator is not None
        starved = free & self._credited
        if self._several or starved:
            granted, starved = self._allocate_general(now, free, starved)
        else:
            self.requests += asking
            self._credit_wait = 0
            granted = free
            if free:
                grants = self._allocator.grant_askers(askers, free)
                grants.sort()
                for i, o in grants:
                    self._cross(i, o, now, -1)
        if not self._wanted:
            return
        # What still waits is matched again when an output it wants, or one just granted,
        # is next free: never again now, since one matching per instant is the crossbar's
        # speedup of 1 (an output left free and unmatched waits for the next cell time).
        # Of the outputs wanted now, those busy before the matching are still busy and
        # still wanted (only a granted output loses askers): their first free time is
        # ``busy_until``; the others are the granted ones and those the crossings' new heads
        # asked for.
        t = busy_until
        o = 0
        while starved:
            if starved & 1:
                f = outs[o].credit.next_return()  # type: ignore[attr-defined]
                if f < t:
                    t = f
            starved >>= 1
            o += 1
        rest = granted | (self._wanted & ~wanted)
        while rest:
            low = rest & -rest
            rest ^= low
            f = outs[low.bit_length() - 1].free_at
            if now < f < t:
                t = f
        self._wake(t)

    def _allocate_general(self, now: float, free: int, starved: int) -> tuple[int, int]:
        """The allocation when some input may ask for several outputs, or some free output
        asked for has credits to check: every input's request goes to the allocator. Return
        the outputs granted and those a head was refused credit for."""
        requests = [m & free for m in self._masks]
        self.requests += len(requests) - requests.count(0)
        with_credit: dict[tuple[int, int], int] = {}
        if starved:
            starved = self._refuse_without_credit(requests, starved, now, with_credit)
        self._credit_wait = starved
        granted = 0
        if any(requests):
            assert self._allocator is not None
            grants = self._allocator.allocate_valid_masks(requests)
            for i in sorted(grants):
                o = grants[i]
                self._cross(i, o, now, with_credit.get((i, o), -1))
                granted |= 1 << o
        return granted, starved

    def _refuse_without_credit(
        self,
        requests: list[int],
        credited: int,
        now: float,
        with_credit: dict[tuple[int, int], int],
    ) -> int:
        """Drop from ``requests`` each (input, output) whose heads for that (free,
        ``credited``) output all lack their credits, recording each refusal; fill
        ``with_credit[(i, o)]`` with the VCs (bits) whose head has them. Return the outputs
        some head was refused."""
        starved = 0
        dropped = 0
        outs = self.out_ports
        q = 0
        for i, req in enumerate(requests):
            want = req & credited
            asked = req
            while want:
                bit = want & -want
                want ^= bit
                o = bit.bit_length() - 1
                if self.voq:
                    q = o
                port: CreditedPort = outs[o]  # type: ignore[assignment]
                credit, costs = port.credit, port.costs
                ok = 0
                for vc, vc_mask in enumerate(self._vc_masks[i]):
                    if vc_mask & bit:
                        cost = costs[self._queues[i][vc][q][0][0]]
                        if credit.fits(cost, now):
                            ok |= 1 << vc
                        else:
                            credit.refused(cost, now)
                            starved |= bit
                if not ok:
                    req ^= bit
                with_credit[(i, o)] = ok
            requests[i] = req
            if asked and not req:
                dropped += 1
        self.refused += dropped
        return starved

    def credit_back(self, port: CreditedPort, t_back: float) -> None:
        """``port``'s far buffer released a message, whose UpdateFC arrives at ``t_back``:
        allocate then if a head waits for that output's credit."""
        if self._credit_wait >> self._out_index[port] & 1:
            self._wake(t_back)

    def _cross(self, i: int, o: int, now: float, vcs: int) -> None:
        """Input ``i``'s head message for output ``o`` on one of ``vcs`` (bits; -1: any)
        crosses the crossbar now, on the VC :meth:`_vc_to_cross` picks."""
        vc_masks = self._vc_masks[i]
        n = len(vc_masks)
        bit = 1 << o
        vc = 0
        if n > 1:
            vc = self._vc_to_cross(i, vc_masks, bit, vcs)
        queue = self._queues[i][vc][o if self.voq else 0]
        msg, _, t_in = queue.popleft()
        self.log.extend((t_in, now, i, msg, o))
        self._occupancy[i][vc] -= 1
        if self.voq:
            if not queue:
                vc_masks[vc] &= ~bit
        else:
            vc_masks[vc] = 1 << queue[0][1] if queue else 0
        if n == 1:
            mask = vc_masks[0]
        else:
            mask = 0
            for m in vc_masks:
                mask |= m
        old = self._masks[i]
        if mask != old:
            self._masks[i] = mask
            self._reask(i, old, mask)
        out = self.out_ports[o]
        # The switch accounts the input buffer itself: the output must not (``send`` with
        # an input port would pass the message through that buffer a second time).
        out.send(msg, None)
        if self._holds >> i & 1:
            self.in_ports[i].release(msg, out.last_start, now)  # type: ignore[union-attr]

    def _reask(self, i: int, old: int, new: int) -> None:
        """Input ``i``'s request went from the outputs ``old`` to ``new`` (bits): mirror it
        in ``_askers`` and ``_wanted``."""
        askers = self._askers
        wanted = self._wanted
        us = 1 << i
        rest = old & ~new
        while rest:
            low = rest & -rest
            rest ^= low
            o = low.bit_length() - 1
            left = askers[o] & ~us
            askers[o] = left
            if not left:
                wanted ^= low
        rest = new & ~old
        while rest:
            low = rest & -rest
            rest ^= low
            askers[low.bit_length() - 1] |= us
            wanted |= low
        self._wanted = wanted
        self._several |= new & (new - 1) != 0

    def _vc_to_cross(self, i: int, vc_masks: list[int], bit: int, vcs: int) -> int:
        """Which of input ``i``'s VCs with a head for the output ``bit`` (and in ``vcs``)
        crosses: by the input port's quota slots where it has a table and one of them has
        slots, else the first from the input's turn on."""
        n = len(vc_masks)
        candidates = 0
        for v in range(n):
            if vc_masks[v] & bit:
                candidates |= 1 << v
        candidates &= vcs
        weighted = self._vc_arbiters[i]
        if weighted is not None:
            vc = weighted.grant_mask(candidates)
            if vc is not None:
                return vc
        turn = self._vc_next[i]
        vc = 0
        for k in range(n):
            v = (turn + k) % n
            if candidates >> v & 1:
                vc = v
                break
        self._vc_next[i] = (vc + 1) % n
        return vc

    def waiting(self) -> list[tuple[float, int, int]]:
        """``(arrival time, input, msg)`` of every message still in the buffers: those the
        ``log`` has no crossing for (none once a run has drained)."""
        return [
            (t_in, i, msg)
            for i, queues in enumerate(self._queues)
            for lanes in queues
            for queue in lanes
            for msg, _, t_in in queue
        ]

    def blocked_heads(self) -> list[tuple[OutputPort, int, int, CreditedPort]]:
        """``(input port, VC, head message, output)`` of every VC head that waits now for its
        credits at a credited output: what its buffer waits for (the switch's management
        input has no buffer upstream, so it is left out)."""
        now = self._env._now
        blocked = []
        for i, queues in enumerate(self._queues):
            port = self.in_ports[i]
            if port is None:
                continue
            for vc, lanes in enumerate(queues):
                for queue in lanes:
                    if not queue:
                        continue
                    msg, o, _ = queue[0]
                    out = self.out_ports[o]
                    if isinstance(out, CreditedPort) and not out.credit.fits(out.costs[msg], now):
                        blocked.append((port, vc, msg, out))
        return blocked

    # --- the one wake-up ---------------------------------------------------------

    def _wake(self, t: float) -> None:
        """Allocate at ``t`` (not before ``now``), unless a wake-up by then is pending."""
        if t < self._wake_at:
            self._wake_at = t
            # Pushed at ``t`` itself, so that the wake-up finds ``free_at <= now`` exactly.
            self._push(self._queue, (t, AFTER_ARRIVALS, next(self._eid), Hop(self._woken_cbs, 0)))

    def _allocate_at(self, t: float) -> None:
        """Allocate at ``t``, as an arrival asks: at once if ``t`` is now and no other event
        is due now, or only events of priority ``allocates_ahead_of`` or later, else by a
        wake-up. With nothing else due now, the wake-up would be the next event stepped, and
        an arrival is its event's whole work, so nothing could change the switch in between:
        allocating at once is the same matching, less an event."""
        if t < self._wake_at:
            queue = self._queue
            if t == self._env._now and (
                not queue or queue[0][0] > t or queue[0][1] >= self.allocates_ahead_of
            ):
                self._wake_at = math.inf
                self._allocate()
            else:
                self._wake(t)

    def _woken(self, _ev: Hop) -> None:
        if self._wake_at != self._env._now:
            return
        self._wake_at = math.inf
        self._allocate()


class OneVcFifoSwitch(InputQueuedSwitch):
    """The input-queued switch with FIFO inputs on a fabric of one VC whose switch outputs
    have no credits (chosen by ``InputQueuedSwitch.for_fabric``): the same matchings,
    crossings and records, less the bookkeeping that only several VCs or credited outputs
    need. Its inputs may still advertise credits upstream (``hold`` and ``release``).

    Each input has one FIFO, ``_fifo[i]`` (the general class's ``_queues[i][0][0]``, so
    whatever reads the buffers reads it); its length is the buffer's occupancy and its
    head's output the input's one request. So every allocation grants output by output
    from the askers (``Allocator.grant_askers``), no head waits for credit, and an input's
    request changes only when its head does.
    """

    __slots__ = ("_fifo",)
    # Other switches' allocations and the watchdog, stepped after the arrivals, cannot
    # change this switch at their instant: what another switch sends arrives later (a
    # serialisation takes time), and what it releases upstream returns credits to a port
    # that is not one of this switch's outputs, which have none.
    allocates_ahead_of = AFTER_ARRIVALS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fifo: list[deque[tuple[int, int, float]]] = []

    def _input(self, port: OutputPort | None, key: Hashable = None) -> int:
        i = super()._input(port, key)
        if i == len(self._fifo):
            self._fifo.append(self._lanes(i, 0)[0])
        return i

    def _output(self, port: OutputPort) -> int:
        if isinstance(port, CreditedPort):
            raise InvariantViolation(
                f"switch {self.name}: channel {port.channel} has credits, and this switch "
                "class was chosen for outputs without them"
            )
        return super()._output(port)

    def arrive(self, msg: int, in_port: OutputPort) -> None:
        if self._dst[msg] == self.index:
            self.take(msg, in_port)
            return
        i = self._in_index.get(in_port)
        if i is None:
            i = self._input(in_port)
        out = self.routing.route(self, msg, in_port)
        o = self._out_index.get(out)
        if o is None:
            o = self._output(out)
        queue = self._fifo[i]
        held = len(queue)
        if held >= self.input_buffer:
            raise self._overflow(msg, i, in_port, 0, held)
        if self._holds >> i & 1:
            in_port.hold(msg)
        t = self._join(msg, i, o, queue, held)
        if t < self._wake_at:
            self._allocate_at(t)

    def _inject_through(self, msg: int, i: int, o: int) -> None:
        queue = self._fifo[i]
        self._wake(self._join(msg, i, o, queue, len(queue)))

    def _join(
        self, msg: int, i: int, o: int, queue: deque[tuple[int, int, float]], held: int
    ) -> float:
        """``_enqueue`` for input ``i``'s FIFO, which holds ``held`` messages."""
        now = self._env._now
        queue.append((msg, o, now))
        if held >= self.peak[i]:
            self.peak[i] = held + 1
        if held:
            return math.inf
        self._askers[o] |= 1 << i
        self._wanted |= 1 << o
        t = self.out_ports[o].free_at
        return t if t > now else now

    def _allocate(self) -> None:
        """The general class's ``_allocate`` on its per-output path, with the next wake-up
        worked out as the crossings are made: every free output asked for is granted, so
        each crossing's output, and a new head's output that was not asked for before, are
        the outputs whose free times it looks at."""
        now = self._env._now
        free, asking, t = self._free_outputs(now)
        self.allocations += 1
        self.requests += asking
        if not free:
            self._wake(t)
            return
        assert self._allocator is not None
        askers = self._askers
        grants = self._allocator.grant_askers(askers, free)
        grants.sort()
        fifo = self._fifo
        outs = self.out_ports
        log = self.log
        holds = self._holds
        wanted = self._wanted
        for i, o in grants:
            queue = fifo[i]
            msg, _, t_in = queue.popleft()
            log.extend((t_in, now, i, msg, o))
            head = queue[0][1] if queue else -1
            if head != o:
                us = 1 << i
                left = askers[o] & ~us
                askers[o] = left
                if not left:
                    wanted ^= 1 << o
                if head >= 0:
                    askers[head] |= us
                    if not wanted >> head & 1:
                        wanted |= 1 << head
                        f = outs[head].free_at
                        if now < f < t:
                            t = f
            out = outs[o]
            out.send(msg, None)
            if holds >> i & 1:
                self.in_ports[i].release(msg, out.last_start, now)  # type: ignore[union-attr]
            if out.free_at < t:
                t = out.free_at
        self._wanted = wanted
        if wanted:
            self._wake(t)


def input_queued_model(params: SwitchParams) -> type[InputQueuedSwitch]:
    """The input-queued switch class that ``params`` (a scenario's ``switch``) describes."""
    return type(
        "ConfiguredInputQueuedSwitch",
        (InputQueuedSwitch,),
        {
            "__slots__": (),
            "voq": params.voq,
            "input_buffer": params.input_buffer,
            "iterations": params.iterations,
            "allocator": params.allocator,
        },
    )

"""The CDC FIFO core as a Hypothesis state machine, sized by the formula for the device as
designed and built as designed or by a faulty device (link.cdc_fifo_depth).

One rule per event the core (``cdc_fifo.CdcFifo``) takes: a write-clock (PHYCLK) edge with
or without a word offered by the link, and a read-clock (REFCLK) edge with the consumer
ready or stalled; the two clocks keep their periods, so whichever edge comes next in time
is the one whose rule can fire. The stop/go signal is not an input of the core: the read
side raises stop from its own view, and it crosses to the writer inside the PHYCLK edges
that clock the synchronisers; the machine checks that crossing edge by edge against its
own model of it. A third rule plays the link's worst case from a drained FIFO: a burst at
line rate into a consumer that stalls at once, or after a few edges of flow. The machine
runs the FIFO on every lane of the worst case at once (every REFCLK phase that matters,
every synchroniser-clock offset, both stalls), so one burst covers every admissible
latency of the stop/go loop. One more rule takes the next edge of whichever clock is due
(see ``the_clocks_run``).

The device is drawn with the machine: its design (width ratio, synchroniser flops and
clock, writer pipeline; narrower than the shipped 32-word-wide FIFO, which
``test_link_cdc_properties.py`` covers, so that a burst stays cheap), its PVT corner, and
whether it was built with the synchronisers of the design or, as a faulty device, with one
or two flops more (a ``synchronizer_flops`` fault); its depth is the formula's
(``(max_rtt_cycles << 1) + 4``) for the design at that corner, moved by -10..+4 entries (a
FIFO sized short, or with margin).

The invariants use the test's own accounts, not the core's counters:

* occupancy: the words the core wrote less those the reader took, counted by the test,
  equal what the core reports and never exceed the depth; each side's synchronised view
  errs on the safe side of it; the Gray pointers change one bit per launch;
* no word lost, duplicated or reordered inside the FIFO: the test numbers the words the
  link hands over through the open gate, follows them through the writer's pipeline,
  keeps them in its own memory at the write pointer, and checks that each read takes the
  next whole wide word of them in order; a word that lands while the writer sees the FIFO
  full is lost, and the core's overflow count is the test's;
* stop/go: the read side asserts stop exactly when its view reaches half the depth, and
  the writer's gate is the stop register as it stood a crossing before the synchroniser
  edge ``flops - 1`` edges back;
* link.cdc_fifo_depth: a FIFO at or above the minimal safe depth (the bisection the clause
  reports, over the same worst case), and so at or above the formula's, never loses a
  word, whatever the traffic; the worst-case burst loses words exactly when the FIFO is
  below the minimal safe depth of the device as built.

Under the ``ci`` profile (40 machines) the draws are 23 devices built as designed and 17
faulty ones; 15 FIFOs are at or above the formula's depth of the device as built, 4
between its minimal safe depth and the formula's, and 21 below its minimal safe depth. 26
bursts were played (swarm testing switches the burst rule off in some machines): the 8
into a FIFO below the minimal safe depth lost words, the 18 into one at or above it none.
"""

from __future__ import annotations

import math
import sys
from collections import deque

import numpy as np
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sitssim.config.cdc_device import CORNERS, flop_timing
from sitssim.link.cdc_fifo import (
    CdcDesign,
    CdcFifo,
    formula_depth,
    gray,
    with_faults,
    worst_case_burst,
)
from sitssim.stages.cdc import loop_at, min_safe_at

# Narrower than the shipped FIFO (32 words wide), so a machine's bursts and the bisection
# of its minimal safe depth stay cheap; the flops, synchroniser clocks and pipelines differ.
DESIGNS = (
    CdcDesign(ratio=8, to_phy_flops=1, to_ref_flops=1, sync_divider=2, pipeline=1),
    CdcDesign(ratio=16, to_phy_flops=2, to_ref_flops=2, sync_divider=3, pipeline=3),
    CdcDesign(ratio=8, to_phy_flops=3, to_ref_flops=2, sync_divider=1, pipeline=0),
)
# The test's memory of the words held, per lane: slots by pointer value modulo a size far
# above any depth drawn, so a slot is reused only if the FIFO held that many words.
SLOTS = 1024
LINE_RATE = 1.0
NONE = -1


class FifoMachine(RuleBasedStateMachine):
    """One FIFO design, on every lane of its worst case at once (see the module docstring).

    link.cdc_fifo_depth on both sides: FIFOs above and below the minimal safe depth and the
    formula's, of devices built as designed and faulty ones."""

    @initialize(
        design=st.sampled_from(DESIGNS),
        corner=st.sampled_from(list(CORNERS)),
        extra_flops=st.sampled_from([0, 1, 0, 2]),
        offset=st.integers(-10, 4),
        bursts=st.integers(1, 2),
    )
    def build(
        self, design: CdcDesign, corner: str, extra_flops: int, offset: int, bursts: int
    ) -> None:
        built = with_faults(design, design.to_phy_flops + extra_flops) if extra_flops else design
        self.design, self.timing = built, flop_timing(corner)
        self.faulty = bool(extra_flops)
        self.depth = formula_depth(loop_at(design, corner, LINE_RATE).max_rtt_cycles) + offset
        self.formula = formula_depth(loop_at(built, corner, LINE_RATE).max_rtt_cycles)
        self.safe = min_safe_at(built, corner, LINE_RATE)
        assert self.formula >= self.safe, "finding: the formula's depth is below the safe one"
        # The worst case's lanes: REFCLK phases, synchroniser offsets, consumer stalls.
        grid = worst_case_burst(built, self.timing, self.depth, LINE_RATE)
        self.phase, self.stall = grid.ref_phase_ps, grid.ready.sum(axis=0)
        self.offset = grid.sync_offset
        self.lanes = len(self.phase)
        self.fifo = CdcFifo(built, self.timing, self.depth, self.offset)
        self.first_step = np.ceil(self.phase / built.write_period_ps - 1e-9).astype(np.int64)
        self.n, self.ref_done = 0, False
        self.bursts = bursts
        zeros = np.zeros(self.lanes, dtype=np.int64)
        # The test's accounts, per lane.
        self.next_word = zeros.copy()
        self.pipeline: deque[np.ndarray] = deque(
            np.full(self.lanes, NONE) for _ in range(built.pipeline)
        )
        self.memory = np.full((self.lanes, SLOTS), NONE, dtype=np.int64)
        self.written, self.delivered, self.lost = zeros.copy(), zeros.copy(), zeros.copy()
        self.last_delivered = np.full(self.lanes, NONE)
        # The stop register around the latest REFCLK edge, and the writer's synchroniser.
        self.t_ref = np.full(self.lanes, -math.inf)
        self.stop_now = np.zeros(self.lanes, dtype=bool)
        self.stop_before = np.zeros(self.lanes, dtype=bool)
        self.synchroniser = np.zeros((built.to_phy_flops, self.lanes), dtype=bool)
        self.burst_losses: list[int] = []

    # --- the clocks ---------------------------------------------------------------------

    def due(self) -> np.ndarray:
        """Lanes whose REFCLK edge falls before this PHYCLK edge (or on it) and is not done."""
        since = self.n - self.first_step
        return (since >= 0) & (since % self.design.ratio == 0) & (not self.ref_done)

    def read_edge(self, ready: np.ndarray) -> np.ndarray:
        """The due lanes' REFCLK edge; ``ready``: the consumer takes a word. Returns the
        lanes that read."""
        d, fifo = self.design, self.fifo
        due = self.due()
        t = self.phase + (self.n - self.first_step) // d.ratio * d.read_period_ps
        view = fifo.read_view()
        before = fifo.rptr.copy()
        fifo.ref_edge(t, due, ready)
        self.ref_done = True
        read = fifo.rptr != before
        assert not (read & ~(due & ready)).any(), "a read nobody asked for"
        assert (fifo.rgray == gray(fifo.rptr)).all(), "the read pointer's Gray code"
        assert (np.bitwise_count(fifo.rgray ^ fifo.rgray_before) <= 1).all(), "two bits moved"
        # Stop: raised exactly when the read side sees half the FIFO or more.
        self.stop_before = np.where(due, self.stop_now, self.stop_before)
        self.stop_now = np.where(due, view >= self.depth // 2, self.stop_now)
        self.t_ref = np.where(due, t, self.t_ref)
        assert (fifo.stop == self.stop_now).all(), "stop is not the read side's view >= half"
        self.take(np.flatnonzero(read), before)
        return read

    def take(self, lanes: np.ndarray, rptr: np.ndarray) -> None:
        """The next wide word of each lane in ``lanes``: whole, in order, then forgotten."""
        ratio = self.design.ratio
        slots = (rptr[lanes, None] * ratio + np.arange(ratio)) % SLOTS
        words = self.memory[lanes[:, None], slots]
        assert (words != NONE).all(), "a read of a slot holding no word"
        assert (np.diff(words, axis=1) > 0).all(), "a wide word out of order"
        assert (words[:, 0] > self.last_delivered[lanes]).all(), "a word read twice"
        self.memory[lanes[:, None], slots] = NONE
        self.delivered[lanes] += ratio
        self.last_delivered[lanes] = words[:, -1]

    def write_edge(self, offer: np.ndarray) -> None:
        """PHYCLK edge ``n``; ``offer``: the link hands the writer a word."""
        d, fifo = self.design, self.fifo
        t = self.n * d.write_period_ps
        gate_closed = self.synchroniser[-1].copy()
        assert (fifo.stop_seen() == gate_closed).all(), "the gate is not stop as it crossed"
        issued = offer & ~gate_closed
        self.pipeline.append(np.where(issued, self.next_word, NONE))
        self.next_word += issued
        landing = self.pipeline.popleft()
        wptr = fifo.wptr.copy()
        written, lost = fifo.phy_edge(self.n, t, offer)
        # A word that lands and is not written is lost; nothing is written but what lands.
        assert not (written & (landing == NONE)).any(), "a write of no word"
        assert (lost == ((landing != NONE) & ~written)).all(), "a landed word unaccounted for"
        lanes = np.flatnonzero(written)
        slots = wptr[lanes] % SLOTS
        assert (self.memory[lanes, slots] == NONE).all(), "a write over a word not yet read"
        self.memory[lanes, slots] = landing[lanes]
        self.written += written
        self.lost += (landing != NONE) & ~written
        assert (fifo.overflows == self.lost).all(), "the core's overflow count"
        assert (np.bitwise_count(fifo.wgray ^ fifo.wgray_before) <= 1).all(), "two bits moved"
        # Synchroniser edges: the first flop takes stop as it stood a crossing ago.
        clocked = (self.n + self.offset) % d.sync_divider == 0
        crossed = np.where(t - self.t_ref >= self.timing.crossing, self.stop_now, self.stop_before)
        shifted = np.vstack([crossed, self.synchroniser[:-1]])
        self.synchroniser = np.where(clocked, shifted, self.synchroniser)
        self.n, self.ref_done = self.n + 1, False

    def in_flight(self) -> np.ndarray:
        """Words in the writer's pipeline, per lane."""
        count = np.zeros(self.lanes, dtype=np.int64)
        for words in self.pipeline:
            count += words != NONE
        return count

    # --- one rule per event ---------------------------------------------------------------

    @precondition(lambda self: self.due().any())
    @rule(ready=st.booleans())
    def read_clock_edge(self, ready: bool) -> None:
        self.read_edge(np.full(self.lanes, ready))

    @precondition(lambda self: not self.due().any())
    @rule(offer=st.booleans())
    def write_clock_edge(self, offer: bool) -> None:
        self.write_edge(np.full(self.lanes, offer))

    @rule(data=st.data())
    def the_clocks_run(self, data: st.DataObject) -> None:
        """The next edge in time, through the rule of its clock. Hypothesis's swarm testing
        switches a random subset of rules off in each example: without this rule a FIFO
        whose next edge's rule is off would be stuck, and the example discarded."""
        if self.due().any():
            self.read_clock_edge(data.draw(st.booleans(), label="ready"))
        else:
            self.write_clock_edge(data.draw(st.booleans(), label="offer"))

    @precondition(lambda self: self.bursts > 0)
    @rule()
    def worst_case_burst(self) -> None:
        """From a drained FIFO, words at line rate while each lane's consumer takes its
        first ``stall`` wide words (none, or a few) and then stalls for good."""
        self.bursts -= 1
        self.drain()
        lost = self.lost.sum()
        edges = np.zeros(self.lanes, dtype=np.int64)  # each lane's REFCLK edges so far
        limit = (
            4 * (self.depth + 2 * self.design.loop_bound_cycles())
            + self.stall.max() * self.design.ratio
        )
        for _ in range(limit):
            due = self.due()
            if due.any():
                self.read_edge(edges < self.stall)
                edges += due
            self.write_edge(np.ones(self.lanes, dtype=bool))
            settled = (edges >= self.stall) & self.synchroniser[-1] & (self.in_flight() == 0)
            if settled.all():
                break
        else:
            raise AssertionError("the burst did not settle: gates open or words in flight")
        self.burst_losses.append(int(self.lost.sum() - lost))
        assert (self.burst_losses[-1] > 0) == (self.depth < self.safe), (
            f"depth {self.depth}, minimal safe {self.safe}: {self.burst_losses[-1]} words lost"
        )

    def drain(self) -> None:
        """Reader ready, the link padding each lane to whole wide words, until every lane
        is empty and its synchronisers and stop register have settled."""
        ratio = self.design.ratio
        settle = self.design.loop_bound_cycles() + 2 * ratio
        quiet = 0
        for _ in range(8 * self.depth + 4 * settle):
            if self.due().any():
                self.read_edge(np.ones(self.lanes, dtype=bool))
            held = self.written - self.delivered + self.in_flight()
            pad = held % ratio != 0
            self.write_edge(pad)
            quiet = quiet + 1 if not (held.any() or pad.any()) else 0
            if quiet > settle:
                break
        fifo = self.fifo
        assert not (fifo.occupancy().any() or fifo.read_view().any() or fifo.write_view().any())
        assert not (fifo.stop.any() or fifo.stop_seen().any() or self.synchroniser.any())

    # --- invariants ---------------------------------------------------------------------------

    @invariant()
    def occupancy_is_the_words_written_less_those_read(self) -> None:
        held = self.written - self.delivered
        assert (self.fifo.occupancy() == held).all()
        assert held.max() <= self.depth

    @invariant()
    def each_side_errs_on_the_safe_side(self) -> None:
        held = self.written - self.delivered
        assert (self.fifo.read_view() <= held).all() and (held <= self.fifo.write_view()).all()

    @invariant()
    def at_or_above_the_minimal_safe_depth_no_word_is_lost(self) -> None:
        """link.cdc_fifo_depth"""
        if self.depth >= self.safe:
            assert not self.lost.any()

    def teardown(self) -> None:
        if not hasattr(self, "fifo") or sys.exc_info()[0] is not None:
            return
        event("faulty device" if self.faulty else "built as designed")
        if self.depth >= self.formula:
            event("depth at or above the formula's")
        elif self.depth >= self.safe:
            event("depth between the minimal safe depth and the formula's")
        else:
            event("depth below the minimal safe depth")
        for lost in self.burst_losses:
            event(f"burst {'lost words' if lost else 'lost nothing'}")


TestFifoMachine = FifoMachine.TestCase
TestFifoMachine.settings = settings(stateful_step_count=40)

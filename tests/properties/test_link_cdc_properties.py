"""Hypothesis properties of the CDC FIFO (clauses link.cdc_fifo_depth, link.cdc_sync_latency).

* The sans-I/O core, driven edge by edge with arbitrary traffic: Gray pointers change one
  bit per launch, each side's synchronised view errs on the safe side, and the FIFO never
  holds more than its depth.
* The formula's depth is never below the bisected minimal safe depth, over the space of
  designs (flops, synchroniser clock, pipeline, width ratio, link rate); the worst-case
  burst overflows just below that depth and not at or above it.
* No burst the link can produce (any pattern of words and consumer stalls, any clock
  phases) overflows a FIFO at or above the minimal safe depth, and none lands more words
  beyond the stop mark than the measured round trip.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sitssim.config.cdc_device import CORNERS, flop_timing
from sitssim.link.cdc_fifo import (
    Burst,
    CdcDesign,
    CdcFifo,
    formula_depth,
    gray,
    measure_loop,
    min_safe_depth,
    overflows_at,
    simulate,
)
from sitssim.stages.cdc import loop_at, min_safe_at

DESIGN = CdcDesign()
designs = st.builds(
    CdcDesign,
    ratio=st.sampled_from([8, 16, 32]),
    to_phy_flops=st.integers(1, 3),
    to_ref_flops=st.integers(1, 3),
    sync_divider=st.integers(1, 5),
    pipeline=st.integers(0, 5),
)


def _bits(x: int) -> int:
    return bin(int(x)).count("1")


class FifoCore(RuleBasedStateMachine):
    """link.cdc_fifo_depth: one FIFO, its two clocks, and whatever the link and consumer do."""

    @initialize(
        design=designs,
        corner=st.sampled_from(list(CORNERS)),
        depth=st.integers(4, 160),
        phase=st.floats(0, 1, exclude_max=True),
        offset=st.integers(0, 4),
    )
    def build(self, design: CdcDesign, corner: str, depth: int, phase: float, offset: int) -> None:
        self.design = design
        self.fifo = CdcFifo(design, flop_timing(corner), depth, np.array([offset]))
        self.phase = phase * design.read_period_ps
        self.n = 0

    @rule(
        edges=st.integers(1, 32),
        offer=st.booleans(),
        ready=st.booleans(),
    )
    def run(self, edges: int, offer: bool, ready: bool) -> None:
        d, fifo = self.design, self.fifo
        for _ in range(edges):
            t = self.n * d.write_period_ps
            m = np.floor((t - self.phase) / d.read_period_ps)
            t_ref = self.phase + m * d.read_period_ps
            if m >= 0 and t_ref > t - d.write_period_ps:
                fifo.ref_edge(np.array([t_ref]), np.array([True]), np.array([ready]))
                self.check_read_pointer()
            fifo.phy_edge(self.n, t, np.array([offer]))
            self.check_write_pointer()
            self.n += 1

    def check_write_pointer(self) -> None:
        assert _bits(self.fifo.wgray[0] ^ self.fifo.wgray_before[0]) <= 1

    def check_read_pointer(self) -> None:
        assert _bits(self.fifo.rgray[0] ^ self.fifo.rgray_before[0]) <= 1
        assert self.fifo.rgray[0] == gray(self.fifo.rptr)[0]

    @invariant()
    def never_over_capacity(self) -> None:
        assert self.fifo.occupancy()[0] <= self.fifo.depth

    @invariant()
    def stale_views_err_safe(self) -> None:
        # The reader never sees words that are not there; the writer never sees free
        # space that is not there.
        fifo = self.fifo
        assert fifo.read_view()[0] <= fifo.occupancy()[0] <= fifo.write_view()[0]


TestFifoCore = FifoCore.TestCase
TestFifoCore.settings = settings(stateful_step_count=25)


@settings(max_examples=6)
@given(
    design=designs,
    corner=st.sampled_from(list(CORNERS)),
    words_per_cycle=st.sampled_from([1.0, 0.75, 0.5]),
)
def test_formula_depth_is_never_below_the_minimal_safe_depth(
    design: CdcDesign, corner: str, words_per_cycle: float
) -> None:
    """link.cdc_fifo_depth: (max_rtt_cycles << 1) + 4 survives the worst-case burst, and the
    bisected minimal safe depth is a sharp edge: overflow just below it, none at or above."""
    timing = flop_timing(corner)
    loop = measure_loop(design, timing, words_per_cycle)
    formula = formula_depth(loop.max_rtt_cycles)
    safe = min_safe_depth(design, timing, formula, words_per_cycle)
    assert formula >= safe, f"finding: the formula's {formula} is below the safe {safe}"
    for depth in (safe, safe + 1, safe + 3):
        assert not overflows_at(design, timing, depth, words_per_cycle)
    for depth in (safe - 1, safe - 4):
        if depth >= 1:
            assert overflows_at(design, timing, depth, words_per_cycle)


def _pattern(runs: list[tuple[int, int]], total: int) -> np.ndarray:
    """``total`` steps of the (on, off) runs, repeated."""
    one = np.concatenate(
        [np.r_[np.ones(on, dtype=bool), np.zeros(off, dtype=bool)] for on, off in runs]
    )
    return np.resize(one, total)


def _runs(longest_on: int, longest_off: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    run = st.tuples(st.integers(1, longest_on), st.integers(0, longest_off))
    return st.lists(run, min_size=1, max_size=6)


@st.composite
def bursts(draw: st.DrawFn, design: CdcDesign, lanes: int = 4, cycles: int = 1200) -> Burst:
    """Words the link offers (runs of line-rate words and gaps) and consumer stalls."""
    n_ref = cycles // design.ratio + 2
    offer = np.stack([_pattern(draw(_runs(600, 80)), cycles) for _ in range(lanes)], axis=1)
    ready = np.stack([_pattern(draw(_runs(12, 24)), n_ref) for _ in range(lanes)], axis=1)
    phase = np.array(
        [draw(st.floats(0, design.read_period_ps, exclude_max=True)) for _ in range(lanes)]
    )
    offset = np.array([draw(st.integers(0, design.sync_divider - 1)) for _ in range(lanes)])
    return Burst(offer=offer, ready=ready, ref_phase_ps=phase, sync_offset=offset)


@given(data=st.data(), corner=st.sampled_from(list(CORNERS)))
def test_no_burst_overflows_a_fifo_at_or_above_the_minimal_safe_depth(
    data: st.DataObject, corner: str
) -> None:
    """link.cdc_fifo_depth: the worst-case burst really is the worst. Any pattern of words
    and consumer stalls, at any phases, leaves a FIFO of the minimal safe depth (or the
    formula's, or anything between) intact, and never lands more words beyond the stop
    mark than the measured round trip."""
    design = DESIGN
    loop = loop_at(design, corner, 1.0)
    safe = min_safe_at(design, corner, 1.0)
    depth = data.draw(st.integers(safe, formula_depth(loop.max_rtt_cycles) + 8), label="depth")
    burst = data.draw(bursts(design), label="burst")
    run = simulate(design, flop_timing(corner), depth, burst, record=False)
    assert not run.overflows.any()
    assert (run.peak - run.mark).max() <= loop.max_rtt_cycles

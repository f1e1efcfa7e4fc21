"""Hypothesis properties of the CDC FIFO and its clauses (link.cdc_fifo_depth,
link.cdc_sync_latency, link.handshake_setup).

* The sans-I/O core as a state machine, one rule per clock edge, against the test's own
  account of every word: ``test_link_cdc_machine.py``.
* The formula's depth is never below the bisected minimal safe depth, over the space of
  designs (flops, synchroniser clock, pipeline, width ratio, link rate); the worst-case
  burst overflows just below that depth and not at or above it.
* No burst the link can produce (any pattern of words and consumer stalls, any clock
  phases) overflows a FIFO at or above the minimal safe depth, and none lands more words
  beyond the stop mark than the measured round trip.
* Each clause's verdict, over depths and designs on both sides of its limit, agrees with
  the same rule applied by the test to figures it works out itself: words lost counted from
  the FIFO's events and the round trip from a stalled run (depth), the synchroniser's
  worst case in closed form (sync latency), the handshake replayed edge by edge (setup).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pandas as pd
import pytest
from cdc_events import words_lost_by_count
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from sitssim.config.cdc_device import CORNERS, WORST_CORNER, flop_timing
from sitssim.errors import Locator
from sitssim.fabric.topology import build_fabric
from sitssim.link.cdc_fifo import (
    Burst,
    CdcDesign,
    formula_depth,
    handshake_setup_cycles,
    measure_loop,
    min_safe_depth,
    overflows_at,
    simulate,
    sync_latency_ps,
    sync_phases,
    worst_case_burst,
)
from sitssim.scenario import Scenario, scenario_from_data
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.stages.cdc import cdc_section, cdc_tables, loop_at, min_safe_at

DESIGN = CdcDesign()
designs = st.builds(
    CdcDesign,
    ratio=st.sampled_from([8, 16, 32]),
    to_phy_flops=st.integers(1, 3),
    to_ref_flops=st.integers(1, 3),
    sync_divider=st.integers(1, 5),
    pipeline=st.integers(0, 5),
)


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


# --- the clauses' verdicts against the test's own figures ---------------------------


def _pair(cdc: dict[str, object]) -> Scenario:
    """Two GPUs on one 64 GT/s link, each receiver's FIFO built from ``cdc``."""
    return scenario_from_data(
        {
            "name": "pair",
            "duration": "1us",
            "topology": {
                "kind": "graph",
                "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}],
                "edges": [{"a": "a", "b": "b"}],
            },
            "link_layer": {"cdc": cdc},
        }
    )


@cache
def _round_trip(corner: str) -> int:
    """The stop/go loop's round trip at ``corner``, as the words a stalled consumer's FIFO
    takes beyond its stop mark (deep enough never to overflow)."""
    timing = flop_timing(corner)
    burst = worst_case_burst(DESIGN, timing, 600, stalls=(0,))
    run = simulate(DESIGN, timing, 600, burst, record=False)
    return int((run.peak - run.mark).max())


# The corner with the longest loop and the one with the shortest (TT/25C is SS/125C's twin).
DEPTH_CORNERS = ("SS/125C", "FF/0C")


@given(depth=st.integers(209, 220))
def test_cdc_fifo_depth_verdict_matches_the_rule_on_counted_figures(depth: int) -> None:
    """link.cdc_fifo_depth fails exactly when some corner's FIFO loses a word (counted from
    its events) or is shallower than (round trip << 1) + 4 (the round trip taken from a
    stalled run); each part agrees with its half.

    209-220 entries straddle both edges (at SS/125C words are lost below 213 and the
    formula wants 218; at FF/0C 211 and 216). The ci profile draws every depth of the
    range once: 4 that lose words and are short, 5 short only, 3 conforming."""
    scenario = _pair({"fifo_depth": depth, "corners": list(DEPTH_CORNERS)})
    tables = cdc_tables(cdc_section(scenario), build_fabric(scenario), Locator(scenario.error))
    verdict = JUDGES["link.cdc_fifo_depth"](RunContext(tables=tables))
    lost = max(words_lost_by_count(DESIGN, depth, c) for c in DEPTH_CORNERS)
    short = any(depth < (_round_trip(c) << 1) + 4 for c in DEPTH_CORNERS)
    parts = {p.name: p for p in verdict.parts}
    assert parts["lost"].verdict == ("fail" if lost else "pass")
    assert parts["lost"].measured == lost
    assert parts["depth"].verdict == ("fail" if short else "pass")
    assert verdict.verdict == ("fail" if lost or short else "pass")
    event(f"lost {bool(lost)}, short {short}")


# Synchroniser designs: flops and the PHYCLK divider that clocks them (125 ps each).
sync_designs = st.builds(CdcDesign, to_phy_flops=st.integers(1, 4), sync_divider=st.integers(1, 6))
PHASES = 1024


def _cdc_rows(design: CdcDesign, corner: str, **columns: float) -> RunContext:
    """A one-row cdc table at ``corner``: the judges' columns, as the stage names them."""
    row = {
        "cdc_id": 0,
        "link": "a>b",
        "corner": corner,
        "flops": design.to_phy_flops,
        "ref_flops": design.to_ref_flops,
        "sync_period_ps": design.sync_period_ps,
        "sync_latency_mean_ns": 0.0,
        "sync_mtbf_years": 0.0,
        **columns,
    }
    return RunContext(tables={"cdc": pd.DataFrame([row])})


@given(design=sync_designs)
def test_cdc_sync_latency_verdict_matches_the_closed_form(design: CdcDesign) -> None:
    """link.cdc_sync_latency: the worst REFCLK->PHYCLK latency over clock phases is, in
    closed form, one asynchronous crossing (clock-to-q, route, setup and margin at SS/125C)
    that just misses an edge, then one synchroniser period per flop, then clock-to-q; the
    verdict is that bound against 1.2 ns. The phase sweep lands within one phase step
    below it.

    1-4 flops on a clock of 1-6 PHYCLK periods: the ci profile draws all 24 designs, 14
    conforming and 10 over the limit (one closer to 1.2 ns than a phase step would be
    discarded; none is)."""
    timing = flop_timing(WORST_CORNER)
    crossing = timing.t_cq + timing.route + timing.t_setup + timing.margin
    bound_ps = crossing + design.to_phy_flops * design.sync_period_ps + timing.t_cq
    step_ps = design.sync_period_ps / PHASES
    limit_ps = 1200.0
    assume(abs(bound_ps - limit_ps) > step_ps)
    swept = sync_latency_ps(design, timing, sync_phases(design, PHASES)).max()
    assert bound_ps - step_ps <= swept <= bound_ps
    ctx = _cdc_rows(design, WORST_CORNER, sync_latency_ns=swept / 1e3)
    verdict = JUDGES["link.cdc_sync_latency"](ctx)
    assert verdict.verdict == ("pass" if bound_ps < limit_ps else "fail")
    event(verdict.verdict)


def _edge_at_or_after(t: float, phase: float, period: float) -> float:
    """The first edge of a clock (edges at ``phase + k * period``) at or after ``t``,
    found by stepping from the edge before ``phase``."""
    edge = phase - period * math.ceil(max(phase - t, 0.0) / period + 1)
    while edge < t - 1e-9:
        edge += period
    return edge


def _replayed_setup(design: CdcDesign, corner: str, phase: float) -> float:
    """The training-complete handshake replayed edge by edge from the PHY's *trained*
    edge at ``phase`` (REFCLK edges at multiples of its period), in REFCLK cycles.

    A signal launched at ``t`` is caught by a receiver's first flop at its clock's first
    edge a crossing after ``t``, reaches the last of its ``n`` flops ``n - 1`` edges
    later, and the logic behind them acts one edge after that."""
    timing = flop_timing(corner)
    crossing = timing.t_cq + timing.route + timing.t_setup + timing.margin
    tr, ts = design.read_period_ps, design.sync_period_ps

    def to_ref(t: float) -> float:
        return _edge_at_or_after(t + crossing, 0.0, tr) + design.to_ref_flops * tr

    def to_phy(t: float) -> float:
        return _edge_at_or_after(t + crossing, phase, ts) + design.to_phy_flops * ts

    ack_up = to_ref(phase)  # the link layer answers trained
    trained_down = to_phy(ack_up)  # the PHY drops trained
    ack_down = to_ref(trained_down)  # the link layer drops its answer
    data_on = to_phy(ack_down)  # the PHY opens the stream
    last_word_in = data_on + (design.pipeline + design.ratio) * design.write_period_ps
    return (to_ref(last_word_in) - phase) / tr


# Few enough for the ci profile to draw every one: its proportion does not hang on a seed.
handshake_designs = st.builds(
    CdcDesign,
    to_phy_flops=st.integers(1, 3),
    to_ref_flops=st.integers(1, 3),
    sync_divider=st.integers(1, 4),
)


@given(design=handshake_designs)
def test_handshake_setup_verdict_matches_an_edge_by_edge_replay(design: CdcDesign) -> None:
    """link.handshake_setup: the shortest setup over clock phases, replayed edge by edge at
    FF/0C by the test, is what the model measures, and the verdict is it against 8.5
    REFCLK cycles.

    1-3 flops each way on a synchroniser clock of 1-4 PHYCLK periods: the ci profile draws
    all 36 designs, 12 too quick and 24 long enough."""
    phases = (np.arange(PHASES) + 0.5) * design.read_period_ps / PHASES
    timing = flop_timing("FF/0C")
    modelled = handshake_setup_cycles(design, timing, phases).min()
    replayed = min(_replayed_setup(design, "FF/0C", float(p)) for p in phases)
    assert modelled == pytest.approx(replayed, abs=1e-9)
    ctx = _cdc_rows(design, "FF/0C", handshake_setup_cycles=modelled)
    verdict = JUDGES["link.handshake_setup"](ctx)
    assert verdict.verdict == ("pass" if replayed > 8.5 else "fail")
    event(verdict.verdict)

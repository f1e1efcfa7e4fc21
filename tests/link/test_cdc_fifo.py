"""The CDC FIFO, its synchronisers and handshake, and their clauses.

Mechanism tests check the cycle model against the closed-form synchroniser timing (two
independent routes to the same crossing), the loop's parts against each other, and the
structure (each flop costs its clock's period). End-to-end tests run the shipped
scenarios; bad input gets exit 2 naming file, line and field.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cdc_events import counted_occupancy, words_lost_by_count
from ruamel.yaml import YAML
from typer.testing import CliRunner

from sitssim import load_scenario, simulate
from sitssim.cli import app
from sitssim.config.cdc_device import (
    CORNERS,
    MTBF_TARGET_YEARS,
    WORST_CORNER,
    closing_divider,
    flop_timing,
    mtbf_years,
)
from sitssim.errors import Locator
from sitssim.fabric.topology import build_fabric
from sitssim.link.cdc_fifo import (
    Burst,
    CdcDesign,
    handshake_setup_cycles,
    measure_loop,
    ref_register_ps,
    sync_latency_ps,
    sync_phases,
    worst_case_burst,
)
from sitssim.link.cdc_fifo import (
    simulate as simulate_fifo,
)
from sitssim.scenario import scenario_from_data
from sitssim.spec.registry import JUDGES, RunContext, Verdict
from sitssim.stages.cdc import cdc_section, cdc_tables

ROOT = Path(__file__).resolve().parents[2]
DESIGN = CdcDesign()
runner = CliRunner()


def _stalled_run(design: CdcDesign, corner: str, depth: int = 600):
    burst = worst_case_burst(design, flop_timing(corner), depth, stalls=(0,))
    return burst, simulate_fifo(design, flop_timing(corner), depth, burst)


@pytest.mark.parametrize("corner", list(CORNERS))
def test_stop_path_in_the_fifo_is_the_synchronisers_latency(corner: str) -> None:
    """link.cdc_sync_latency: the cycle model's stop crossing equals the closed form.

    The FIFO sees stop one PHYCLK edge after the last synchroniser flop's edge; the
    closed form gives that flop's output time. Every clock phase must agree exactly.
    """
    design = replace(DESIGN, to_phy_flops=3, sync_divider=3)
    timing = flop_timing(corner)
    burst, run = _stalled_run(design, corner)
    tw = design.write_period_ps
    rise = run.stop_rise_ps
    first_sync = ((-burst.sync_offset) % design.sync_divider) * tw
    phase = np.mod(first_sync - rise, design.sync_period_ps)
    phase[phase == 0] = design.sync_period_ps
    latency = sync_latency_ps(design, timing, phase)
    gate = run.stop_seen.argmax(axis=0) * tw
    np.testing.assert_allclose(gate, rise + latency - timing.t_cq + tw, atol=1e-6)


@pytest.mark.parametrize("corner", list(CORNERS))
def test_first_wide_word_is_read_when_the_closed_form_says(corner: str) -> None:
    """link.handshake_setup: its last step (the first word crossing) matches the FIFO."""
    design = replace(DESIGN, pipeline=5)
    timing = flop_timing(corner)
    lanes = 32 * 12
    phase = (np.arange(lanes) + 0.5) * design.read_period_ps / lanes
    start = 7
    offer = np.zeros((500, lanes), dtype=bool)
    offer[start:] = True
    ready = np.ones((20, lanes), dtype=bool)
    burst = Burst(offer, ready, phase, np.arange(lanes) % design.sync_divider)
    run = simulate_fifo(design, timing, 400, burst)
    # The read happened on the REFCLK edge just before the PHYCLK edge that first shows it.
    step = (run.rptr >= 1).argmax(axis=0)
    tr = design.read_period_ps
    t_read = phase + np.floor((step * design.write_period_ps - phase) / tr + 1e-9) * tr
    last_word = (start + design.pipeline + design.ratio - 1) * design.write_period_ps
    expected = ref_register_ps(design, timing, np.full(lanes, last_word), phase)
    np.testing.assert_allclose(t_read, expected, atol=1e-6)


def test_round_trip_is_what_lands_beyond_the_stop_mark() -> None:
    """link.cdc_fifo_depth: with the consumer stalled, the words above the mark are the loop.

    Its parts add up: detection and stop path take the writer from the mark to a closed
    gate, and the in-flight words are the writer's pipeline.
    """
    _, run = _stalled_run(DESIGN, WORST_CORNER)
    loop = measure_loop(DESIGN, flop_timing(WORST_CORNER))
    assert loop.max_rtt_cycles == int((run.peak - run.mark).max())
    assert loop.in_flight_words == DESIGN.pipeline
    to_gate = loop.detect_cycles + loop.stop_path_cycles
    assert to_gate + loop.in_flight_words - 1 == pytest.approx(loop.max_rtt_cycles)
    assert loop.stop_path_cycles < loop.detect_cycles


def test_each_stage_of_the_loop_costs_its_own_clock() -> None:
    """link.cdc_fifo_depth: a REFCLK-side flop adds a read period to the loop (ratio write
    cycles), a PHYCLK-side flop a synchroniser period, a pipeline stage one word."""
    timing = flop_timing(WORST_CORNER)
    base = measure_loop(DESIGN, timing).max_rtt_cycles

    def grown(**change: int) -> int:
        return measure_loop(replace(DESIGN, **change), timing).max_rtt_cycles - base

    assert grown(to_ref_flops=DESIGN.to_ref_flops + 1) == DESIGN.ratio
    assert grown(to_phy_flops=DESIGN.to_phy_flops + 1) == DESIGN.sync_divider
    assert grown(pipeline=DESIGN.pipeline + 1) == 1


def test_critical_phases_find_the_worst_case_of_a_fine_sweep() -> None:
    """link.cdc_fifo_depth: the worst-case burst's few phases lose nothing against 16 per
    PHYCLK cycle (every word alignment and synchroniser offset)."""
    timing = flop_timing(WORST_CORNER)
    tw = DESIGN.write_period_ps
    sub = (np.arange(16) + 0.5) * tw / 16
    phase = (np.arange(DESIGN.ratio)[:, None] * tw + sub[None, :]).ravel()
    phase, offset = (a.ravel() for a in np.meshgrid(phase, np.arange(DESIGN.sync_divider)))
    cycles = 800
    burst = Burst(
        np.ones((cycles, len(phase)), dtype=bool),
        np.zeros((1, len(phase)), dtype=bool),
        phase,
        offset,
    )
    fine = simulate_fifo(DESIGN, timing, 600, burst, record=False)
    assert int((fine.peak - fine.mark).max()) == measure_loop(DESIGN, timing).max_rtt_cycles


def test_each_synchroniser_flop_adds_one_synchroniser_period() -> None:
    """link.cdc_sync_latency: the three-flop fault is slower by one period at every phase."""
    timing = flop_timing(WORST_CORNER)
    phases = sync_phases(DESIGN, 256)
    two = sync_latency_ps(DESIGN, timing, phases)
    three = sync_latency_ps(replace(DESIGN, to_phy_flops=3), timing, phases)
    np.testing.assert_allclose(three - two, DESIGN.sync_period_ps)
    # Over the phases the latency spans one synchroniser period (less the grid's step).
    spread = two.max() - two.min()
    step = DESIGN.sync_period_ps / len(phases)
    assert DESIGN.sync_period_ps - step <= spread + 1e-9 <= DESIGN.sync_period_ps


def test_slow_corners_are_slow() -> None:
    """link.cdc_sync_latency and link.handshake_setup: SS is slowest, FF fastest."""
    phases = sync_phases(DESIGN, 512)
    hs_phases = (np.arange(512) + 0.5) * DESIGN.read_period_ps / 512
    latency = {c: sync_latency_ps(DESIGN, flop_timing(c), phases).max() for c in CORNERS}
    setup = {c: handshake_setup_cycles(DESIGN, flop_timing(c), hs_phases).min() for c in CORNERS}
    assert latency["SS/125C"] > latency["TT/25C"] > latency["FF/0C"]
    assert setup["SS/125C"] > setup["TT/25C"] > setup["FF/0C"]


def test_fewer_flops_shorten_the_handshake() -> None:
    """link.handshake_setup: every crossing of the handshake waits on its synchroniser."""
    timing = flop_timing("FF/0C")
    phases = (np.arange(512) + 0.5) * DESIGN.read_period_ps / 512
    shortest = [
        handshake_setup_cycles(
            replace(DESIGN, to_phy_flops=n, to_ref_flops=n), timing, phases
        ).min()
        for n in (1, 2, 3)
    ]
    assert shortest[0] < shortest[1] < shortest[2]


def test_the_synchroniser_clock_is_the_slowest_that_closes_mtbf() -> None:
    """link.cdc_sync_latency: the divider is the smallest meeting the MTBF target at SS."""
    tw, f_data = DESIGN.write_period_ps, 1e12 / DESIGN.read_period_ps
    divider = closing_divider(2, tw, f_data)
    ss = flop_timing(WORST_CORNER)
    assert mtbf_years(ss, 2, divider * tw, f_data) >= MTBF_TARGET_YEARS
    assert mtbf_years(ss, 2, (divider - 1) * tw, f_data) < MTBF_TARGET_YEARS
    years = [mtbf_years(ss, 2, k * tw, f_data) for k in range(1, 8)]
    assert years == sorted(years)
    # A flop with nothing behind it resolves nothing, however slow its clock.
    assert mtbf_years(ss, 1, 64 * tw, f_data) < 1e-6


# --- end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fat_tree():
    return simulate(load_scenario(ROOT / "scenarios/fat_tree_8gpu.yaml"))


def _verdict(result, clause_id: str):
    return next(v for v in result.verdicts if v.id == clause_id)


def _part(verdict, name: str):
    return next(p for p in verdict.parts if p.name == name)


def test_fat_tree_evaluates_every_link_and_corner_and_passes(fat_tree) -> None:
    """link.cdc_fifo_depth, link.cdc_sync_latency, link.handshake_setup pass on the fat tree.

    The depth clause's two parts: no word lost (counted again from the fifo table's events,
    which never hold more than the depth), and the configured depth against the formula,
    which ``fifo_depth: auto`` meets by construction, as the detail says."""
    cdc = fat_tree.tables["cdc"]
    assert len(cdc) == len(fat_tree.fabric.channels) * len(CORNERS)
    for clause_id in ("link.cdc_fifo_depth", "link.cdc_sync_latency", "link.handshake_setup"):
        verdict = _verdict(fat_tree, clause_id)
        assert verdict.verdict == "pass", verdict.detail
    assert (cdc["overflows"] == 0).all()
    assert (cdc["formula_depth"] >= cdc["min_safe_depth"]).all()
    depth = _verdict(fat_tree, "link.cdc_fifo_depth")
    assert [(p.name, p.basis) for p in depth.parts] == [
        ("lost", "measured"),
        ("depth", "configured"),
    ]
    assert _part(depth, "depth").measured == _part(depth, "depth").limit == 218
    assert "holds by construction" in depth.detail
    assert "minimal safe depth by bisection there 213" in depth.detail
    fifo = fat_tree.tables["fifo"]
    counted = counted_occupancy(fifo, DESIGN.ratio)
    np.testing.assert_array_equal(counted.to_numpy(), fifo["occupancy"].to_numpy())
    configured = fifo.merge(cdc, on=["link_id", "corner"], how="left")["configured_depth"]
    assert (counted.to_numpy() <= configured.to_numpy()).all()
    # The traces do fill: a stalled consumer takes the FIFO past its stop mark.
    assert (counted.to_numpy() > configured.to_numpy() // 2).any()
    assert not fifo["lost"].any()


def test_an_explicit_depth_is_not_sized_by_construction() -> None:
    """link.cdc_fifo_depth: only ``fifo_depth: auto`` is said to meet the formula by
    construction; the same 218 entries written out are a configured depth like any other."""
    data = YAML(typ="safe").load((ROOT / "scenarios/violations/cdc_formula_short.yaml").read_text())
    data["link_layer"]["cdc"]["fifo_depth"] = 218
    scenario = scenario_from_data(data)
    tables = cdc_tables(cdc_section(scenario), build_fabric(scenario), Locator(scenario.error))
    verdict = _judged(RunContext(tables=tables), "link.cdc_fifo_depth")
    assert verdict.verdict == "pass"
    assert not tables["cdc"]["depth_auto"].any()
    assert "by construction" not in verdict.detail


def test_undersized_fifo_overflows_in_the_run(tmp_path: Path) -> None:
    """link.cdc_fifo_depth fails on both parts: the FIFO lost words (measured: the count
    agrees with one made from the burst's events) and 192 is below the formula's 218
    (configured: the scenario's depth); the fifo rows cited lost them."""
    out = tmp_path / "out"
    path = ROOT / "scenarios/violations/cdc_undersized.yaml"
    result = runner.invoke(app, ["run", str(path), "--out", str(out), "--no-figures"])
    assert result.exit_code == 1, result.output
    assert "FAIL link.cdc_fifo_depth" in result.output
    report = json.loads((out / "report.json").read_text())
    verdict = next(c for c in report["clauses"] if c["id"] == "link.cdc_fifo_depth")
    assert verdict["verdict"] == "fail"
    parts = {p["name"]: p for p in verdict["parts"]}
    assert parts["lost"]["verdict"] == parts["depth"]["verdict"] == "fail"
    assert parts["lost"]["measured"] == words_lost_by_count(DESIGN, 192, WORST_CORNER) > 0
    assert parts["depth"]["measured"] == load_scenario(path).link_layer.cdc.fifo_depth
    assert parts["depth"]["limit"] == 218
    # The verdict's own figures are its measured part's.
    assert (verdict["measured"], verdict["basis"]) == (parts["lost"]["measured"], "measured")
    cdc = pd.read_parquet(out / "cdc.parquet")
    fifo = pd.read_parquet(out / "fifo.parquet")
    assert (cdc["configured_depth"] < cdc["min_safe_depth"]).all()
    assert (cdc["overflows"] > 0).all()
    rows = next(e for e in verdict["evidence"] if e["table"] == "fifo")
    counted = counted_occupancy(fifo, DESIGN.ratio)
    cited = fifo.set_index("sample_id").loc[rows["rows"]]
    assert cited["lost"].all()
    # A word is lost only when the FIFO is full: counted from its writes and reads, it
    # fills to its depth and no further.
    assert (counted.loc[fifo["sample_id"].isin(rows["rows"])] == 192).all()
    assert counted.max() == 192


def test_a_fifo_between_the_safe_depth_and_the_formula_fails_by_the_formula_alone() -> None:
    """link.cdc_fifo_depth: 215 entries lose no word (213 is the bisected safe depth) but
    are below the formula's 218; only the configured part fails, and it heads the verdict."""
    ctx = _cdc_only(ROOT / "scenarios/violations/cdc_formula_short.yaml")
    verdict = _judged(ctx, "link.cdc_fifo_depth")
    assert verdict.verdict == "fail"
    lost, depth = _part(verdict, "lost"), _part(verdict, "depth")
    assert lost.verdict == "pass"
    assert lost.measured == words_lost_by_count(DESIGN, 215, WORST_CORNER) == 0
    assert (depth.verdict, depth.measured, depth.limit) == ("fail", 215, 218)
    assert (verdict.measured, verdict.basis) == (215, "configured")
    cdc = ctx.tables["cdc"]
    assert (cdc["min_safe_depth"] <= 215).all()
    assert (cdc["formula_depth"] > 215).all()
    assert [e.table for e in verdict.evidence] == ["cdc"]


def _cdc_only(path: Path) -> RunContext:
    """The CDC stage and its judges alone: the traffic does not enter these clauses."""
    scenario = load_scenario(path)
    fabric = build_fabric(scenario)
    return RunContext(tables=cdc_tables(cdc_section(scenario), fabric, Locator(scenario.error)))


def _judged(ctx: RunContext, clause_id: str) -> Verdict:
    return JUDGES[clause_id](ctx)


def test_three_flop_receiver_fails_sync_latency_alone() -> None:
    """link.cdc_sync_latency fails on the faulty receiver's row only (faulty device)."""
    ctx = _cdc_only(ROOT / "scenarios/violations/faulty_link.yaml")
    verdict = _judged(ctx, "link.cdc_sync_latency")
    assert verdict.verdict == "fail"
    cdc = ctx.tables["cdc"]
    cited = cdc.set_index("cdc_id").loc[list(verdict.evidence[0].rows)]
    assert set(cited["link"]) == {"sw1.0>gpu3"}
    assert set(cited["corner"]) == {"SS/125C"}
    healthy = cdc[(cdc["corner"] == "SS/125C") & (cdc["link"] != "sw1.0>gpu3")]
    assert (healthy["sync_latency_ns"] < verdict.limit).all()
    # The fault is one receiver: its link's loop is longer, nobody else's.
    loops = cdc.groupby("link", observed=True)["max_rtt_cycles"].max()
    assert loops.idxmax() == "sw1.0>gpu3"
    assert loops.drop("sw1.0>gpu3").nunique() == 1
    assert _judged(ctx, "link.handshake_setup").verdict == "pass"
    assert _judged(ctx, "link.cdc_fifo_depth").verdict == "pass"


def test_single_flop_synchronisers_fail_the_handshake() -> None:
    """link.handshake_setup fails when the synchronisers have one flop (misconfiguration)."""
    path = ROOT / "scenarios/violations/cdc_single_flop.yaml"
    ctx = _cdc_only(path)
    verdict = _judged(ctx, "link.handshake_setup")
    assert verdict.verdict == "fail"
    assert verdict.measured <= verdict.limit
    assert verdict.evidence[0].total == len(build_fabric(load_scenario(path)).channels)
    assert _judged(ctx, "link.cdc_sync_latency").verdict == "pass"


def test_no_cdc_block_no_cdc_tables() -> None:
    """Without link_layer.cdc the stage adds nothing and the CDC clauses are n/a."""
    scenario = load_scenario(ROOT / "scenarios/violations/tso_loaded.yaml")
    fabric = build_fabric(scenario)
    assert cdc_tables(cdc_section(scenario), fabric, Locator(scenario.error)) == {}
    ctx = RunContext(tables={})
    for clause_id in ("link.cdc_fifo_depth", "link.cdc_sync_latency", "link.handshake_setup"):
        assert _judged(ctx, clause_id).verdict == "n/a"


def test_clauses_are_na_when_their_corner_is_not_evaluated(fat_tree) -> None:
    tables = dict(fat_tree.tables)
    tables["cdc"] = tables["cdc"][tables["cdc"]["corner"] == "TT/25C"]
    ctx = RunContext(tables=tables)
    for clause_id, corner in (
        ("link.cdc_sync_latency", "SS/125C"),
        ("link.handshake_setup", "FF/0C"),
    ):
        verdict = _judged(ctx, clause_id)
        assert verdict.verdict == "n/a"
        assert f"{corner} corner was not evaluated" in verdict.detail
    assert _judged(ctx, "link.cdc_fifo_depth").verdict == "pass"
    ctx.tables.pop("cdc")
    assert _judged(ctx, "link.cdc_fifo_depth").verdict == "n/a"


# --- bad input ------------------------------------------------------------------

MARK = "# <-"
HEAD = "version: 1\nname: bad\nduration: 2us\n"
TREE = "topology:\n  kind: fat_tree\n  gpus: 4\n  levels: 1\n  radix: 4\n"
CDC = "link_layer:\n  cdc: {}\n"
FAULT = CDC + "faults:\n  - kind: synchronizer_flops\n"
BAD_INPUT = {
    "unknown key": (
        "link_layer:\n  cdc:\n    fifo_dept: 100  # <-\n",
        "link_layer.cdc.fifo_dept",
        "did you mean 'fifo_depth'",
    ),
    "depth not a number": (
        "link_layer:\n  cdc:\n    fifo_depth: big  # <-\n",
        "link_layer.cdc.fifo_depth",
        "or 'auto'",
    ),
    "unknown corner": (
        "link_layer:\n  cdc:\n    corners: [SS/85C]  # <-\n",
        "link_layer.cdc.corners[0]",
        "'SS/125C'",
    ),
    "corner twice": (
        "link_layer:\n  cdc:\n    corners: [FF/0C, FF/0C]  # <-\n",
        "link_layer.cdc.corners",
        "once",
    ),
    # Python's float() reads Arabic-Indic digits ('٨' is 8); a scenario must write 8.
    "clock in Unicode digits": (
        "link_layer:\n  cdc:\n    write_clock: ٨GHz  # <-\n",
        "link_layer.cdc.write_clock",
        "expected a frequency like '8GHz' (Hz, kHz, MHz, GHz), got '٨GHz'",
    ),
    "long clock clipped": (
        "link_layer:\n  cdc:\n    read_clock: " + "2" * 3000 + "MHz  # <-\n",
        "link_layer.cdc.read_clock",
        "…' (3003 chars)",
    ),
    "clock without unit": (
        "link_layer:\n  cdc:\n    write_clock: 8  # <-\n",
        "link_layer.cdc.write_clock",
        "with a unit",
    ),
    "clocks not a whole ratio": (
        "link_layer:\n  cdc:\n    read_clock: 300MHz  # <-\n",
        "link_layer.cdc.read_clock",
        "whole multiple",
    ),
    "write clock too fast": (
        "link_layer:\n  cdc:\n    write_clock: 16GHz  # <-\n    read_clock: 500MHz\n",
        "link_layer.cdc.write_clock",
        "shorter than an asynchronous crossing",
    ),
    "one flop with an automatic divider": (
        "link_layer:\n  cdc:\n    synchronizer_flops: 1  # <-\n",
        "link_layer.cdc.synchronizer_flops",
        "give it explicitly",
    ),
    "fault on an unknown device": (
        FAULT + "    device: gpu9  # <-\n    peer: sw1.0\n    flops: 3\n",
        "faults[0].device",
        "unknown device 'gpu9'",
    ),
    "fault on a link that does not exist": (
        FAULT + "    device: gpu0\n    peer: gpu1  # <-\n    flops: 3\n",
        "faults[0].peer",
        "no link from 'gpu1'",
    ),
    "fault twice on one receiver": (
        FAULT
        + "    device: gpu0\n    peer: sw1.0\n    flops: 3\n"
        + "  - kind: synchronizer_flops\n    device: gpu0  # <-\n    peer: sw1.0\n    flops: 4\n",
        "faults[1].device",
        "a second synchronizer_flops fault",
    ),
    "fault without a CDC to break": (
        "faults:\n  - kind: synchronizer_flops  # <-\n    device: gpu0\n    peer: sw1.0\n"
        "    flops: 3\n",
        "faults[0].kind",
        "add link_layer.cdc",
    ),
    "link faster than the write clock": (
        CDC + "links:\n  default:\n    rate: 128GT/s  # <-\n",
        "links.default.rate",
        "raise link_layer.cdc.write_clock",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_cdc_input_names_file_line_and_field(case: str, tmp_path: Path) -> None:
    body, field, words = BAD_INPUT[case]
    text = HEAD + TREE + body
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.rstrip().endswith(MARK))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"{path}:{line}: {field}:" in result.output
    assert words in result.output
    assert "Traceback" not in result.output
    assert not out.exists()

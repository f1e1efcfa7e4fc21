"""The CDC stage: every link receiver's FIFO, synchroniser and handshake, per corner.

Each channel (one direction of a link) ends in a CDC FIFO in the receiving device. The
stage builds that FIFO from the ``link_layer.cdc`` profile (and a ``synchronizer_flops``
fault, for the one receiver it names), then measures at every corner the scenario
evaluates: the stop/go loop's round trip, the formula's depth, the minimal safe depth by
bisection, the worst-case burst at the configured depth, the REFCLK→PHYCLK
synchronisation latency and the training-complete handshake. Channels whose FIFOs are
built alike share one computation (and runs share it too: it is a pure function of the
design). With ``fifo_depth: auto`` the device is sized by the formula from the largest
round trip over all three corners, since one piece of silicon serves every corner.

Tables: ``cdc`` (one row per channel and corner) and ``fifo`` (the configured FIFO's
occupancy, edge by edge, on the clock phase that fills it most, with the words written,
read and lost at each edge, from which the occupancy can be counted again).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from sitssim.config.cdc_device import CORNERS, flop_timing, mtbf_years
from sitssim.config.cdc_profile import CdcProfile, SynchronizerFlopsFault
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.link.cdc_fifo import (
    CdcDesign,
    LoopTiming,
    formula_depth,
    handshake_setup_cycles,
    measure_loop,
    min_safe_depth,
    simulate,
    sync_latency_ps,
    sync_phases,
    with_faults,
    worst_case_burst,
)
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring

# Bits each lane hands the FIFO per PHYCLK cycle: 64 GT/s on an 8 GHz PHYCLK.
BITS_PER_LANE_PER_CYCLE = 8
PHASE_POINTS = 4096
CDC_COLUMNS = [
    "link_id",
    "link",
    "src",
    "dst",
    "corner",
    "flops",
    "ref_flops",
    "sync_period_ps",
    "words_per_cycle",
    "max_rtt_cycles",
    "rtt_detect_cycles",
    "rtt_stop_path_cycles",
    "rtt_in_flight_words",
    "formula_depth",
    "min_safe_depth",
    "configured_depth",
    "depth_auto",
    "overflows",
    "peak_occupancy",
    "sync_latency_ns",
    "sync_latency_mean_ns",
    "sync_mtbf_years",
    "handshake_setup_cycles",
]


@dataclass(frozen=True)
class CornerEvaluation:
    corner: str
    loop: LoopTiming
    formula_depth: int
    min_safe_depth: int
    configured_depth: int
    overflows: int
    peak_occupancy: int
    trace: dict[str, np.ndarray]
    sync_latency_ps: float
    sync_latency_mean_ps: float
    sync_mtbf_years: float
    handshake_setup_cycles: float


@lru_cache(maxsize=64)
def loop_at(design: CdcDesign, corner: str, words_per_cycle: float) -> LoopTiming:
    return measure_loop(design, flop_timing(corner), words_per_cycle)


def sized_depth(design: CdcDesign, words_per_cycle: float) -> int:
    """``fifo_depth: auto``: the formula's depth for the longest loop over every corner."""
    return formula_depth(max(loop_at(design, c, words_per_cycle).max_rtt_cycles for c in CORNERS))


@lru_cache(maxsize=64)
def min_safe_at(design: CdcDesign, corner: str, words_per_cycle: float) -> int:
    start = formula_depth(loop_at(design, corner, words_per_cycle).max_rtt_cycles)
    return min_safe_depth(design, flop_timing(corner), start, words_per_cycle)


@lru_cache(maxsize=64)
def evaluate_corner(
    design: CdcDesign, depth: int, corner: str, words_per_cycle: float
) -> CornerEvaluation:
    """Everything the clauses need about one FIFO design at one corner."""
    timing = flop_timing(corner)
    loop = loop_at(design, corner, words_per_cycle)
    formula = formula_depth(loop.max_rtt_cycles)
    burst = worst_case_burst(design, timing, depth, words_per_cycle)
    run = simulate(design, timing, depth, burst)
    lost = run.lost.sum(axis=0)
    lane = int(np.lexsort((-run.peak, -lost))[0])
    # A wide word was read where the read pointer moved (it moves by one, modulo its width).
    rptr = run.rptr[:, lane]
    read = np.diff(rptr, prepend=0) != 0
    trace = {
        "cycle": np.arange(run.occupancy.shape[0], dtype=np.int32),
        "occupancy": run.occupancy[:, lane],
        "read_view": run.read_view[:, lane],
        "stop": run.stop_seen[:, lane],
        "written": run.written[:, lane],
        "read": read,
        "lost": run.lost[:, lane],
    }
    latency = sync_latency_ps(design, timing, sync_phases(design, PHASE_POINTS))
    handshake_phases = (np.arange(PHASE_POINTS) + 0.5) * design.read_period_ps / PHASE_POINTS
    return CornerEvaluation(
        corner=corner,
        loop=loop,
        formula_depth=formula,
        min_safe_depth=min_safe_at(design, corner, words_per_cycle),
        configured_depth=depth,
        overflows=int(lost.sum()),
        peak_occupancy=int(run.peak.max()),
        trace=trace,
        sync_latency_ps=float(latency.max()),
        sync_latency_mean_ps=float(latency.mean()),
        sync_mtbf_years=mtbf_years(
            timing, design.to_phy_flops, design.sync_period_ps, 1e12 / design.read_period_ps
        ),
        handshake_setup_cycles=float(
            handshake_setup_cycles(design, timing, handshake_phases).min()
        ),
    )


@dataclass(frozen=True)
class CdcSection:
    """What the stage reads: the ``link_layer.cdc`` profile and the ``synchronizer_flops``
    faults, by index in the scenario's ``faults:``."""

    profile: CdcProfile
    faults: tuple[tuple[int, SynchronizerFlopsFault], ...]


def cdc_section(scenario: Scenario) -> CdcSection:
    faults = tuple(
        (i, f) for i, f in enumerate(scenario.faults) if isinstance(f, SynchronizerFlopsFault)
    )
    return CdcSection(scenario.link_layer.cdc, faults)


def _faulty_receivers(
    section: CdcSection, fabric: Fabric, where: Locator
) -> dict[tuple[str, str], int]:
    """``(transmitter, receiver)`` channel -> the faulty synchroniser's flop count."""
    faulty: dict[tuple[str, str], int] = {}
    for i, fault in section.faults:
        if not section.profile.enabled:
            raise where.error(
                ("faults", i, "kind"),
                "a synchronizer_flops fault needs the CDC FIFO evaluated: add link_layer.cdc",
            )
        for key, name in (("device", fault.device), ("peer", fault.peer)):
            if name not in fabric.graph:
                raise where.error(
                    ("faults", i, key), f"unknown device {name!r}; no such node in the fabric"
                )
        channel = (fault.peer, fault.device)
        if channel not in fabric.channel_index:
            raise where.error(
                ("faults", i, "peer"), f"{fault.device!r} has no link from {fault.peer!r}"
            )
        if channel in faulty:
            raise where.error(
                ("faults", i, "device"),
                f"a second synchronizer_flops fault for the receiver of {fault.device!r} "
                f"on the link from {fault.peer!r}",
            )
        faulty[channel] = fault.flops
    return faulty


def _words_per_cycle(rate_gts: float, write_clock_hz: float) -> float:
    return rate_gts * 1e9 / (BITS_PER_LANE_PER_CYCLE * write_clock_hz)


def _check_write_clock(profile: CdcProfile, fabric: Fabric, where: Locator) -> None:
    """A lane faster than the FIFO's write clock carries has no FIFO design to evaluate."""
    for channel in fabric.channels:
        if _words_per_cycle(channel.rate_gts, profile.write_clock) > 1 + 1e-9:
            raise where.error(
                ("links", channel.profile, "rate"),
                f"{channel.rate_gts:g} GT/s is more than the CDC FIFO's write clock carries "
                f"({BITS_PER_LANE_PER_CYCLE} bits per lane per cycle at "
                f"{profile.write_clock / 1e9:g} GHz); raise link_layer.cdc.write_clock",
            )


def check_cdc(section: CdcSection, fabric: Fabric, where: Locator) -> None:
    """Everything ``cdc_tables`` would reject (faults, link rates), without evaluating."""
    _faulty_receivers(section, fabric, where)
    if section.profile.enabled:
        _check_write_clock(section.profile, fabric, where)


def cdc_tables(section: CdcSection, fabric: Fabric, where: Locator) -> dict[str, pd.DataFrame]:
    """Evaluate every channel's CDC FIFO; the ``cdc`` and ``fifo`` tables (none unless
    the scenario has a ``link_layer.cdc`` block)."""
    profile = section.profile
    faulty = _faulty_receivers(section, fabric, where)
    if not profile.enabled:
        return {}
    flops = profile.synchronizer_flops
    base = CdcDesign(
        write_period_ps=1e12 / profile.write_clock,
        ratio=round(profile.write_clock / profile.read_clock),
        to_phy_flops=flops,
        to_ref_flops=flops,
        sync_divider=profile.divider(),
        pipeline=profile.writer_pipeline,
    )
    _check_write_clock(profile, fabric, where)
    rows: list[dict[str, object]] = []
    traces: list[tuple[int, dict[str, np.ndarray], float]] = []
    for channel in fabric.channels:
        words = _words_per_cycle(channel.rate_gts, profile.write_clock)
        design = with_faults(base, faulty.get((channel.src, channel.dst)))
        auto = profile.fifo_depth == "auto"
        depth = sized_depth(design, words) if auto else int(profile.fifo_depth)
        for corner in profile.corners:
            ev = evaluate_corner(design, depth, corner, words)
            rows.append(
                {
                    "link_id": channel.id,
                    "link": channel.name,
                    "src": channel.src,
                    "dst": channel.dst,
                    "corner": corner,
                    "flops": design.to_phy_flops,
                    "ref_flops": design.to_ref_flops,
                    "sync_period_ps": design.sync_period_ps,
                    "words_per_cycle": words,
                    "max_rtt_cycles": ev.loop.max_rtt_cycles,
                    "rtt_detect_cycles": ev.loop.detect_cycles,
                    "rtt_stop_path_cycles": ev.loop.stop_path_cycles,
                    "rtt_in_flight_words": ev.loop.in_flight_words,
                    "formula_depth": ev.formula_depth,
                    "min_safe_depth": ev.min_safe_depth,
                    "configured_depth": ev.configured_depth,
                    "depth_auto": auto,
                    "overflows": ev.overflows,
                    "peak_occupancy": ev.peak_occupancy,
                    "sync_latency_ns": ev.sync_latency_ps / 1e3,
                    "sync_latency_mean_ns": ev.sync_latency_mean_ps / 1e3,
                    "sync_mtbf_years": ev.sync_mtbf_years,
                    "handshake_setup_cycles": ev.handshake_setup_cycles,
                }
            )
            traces.append((len(rows) - 1, ev.trace, design.write_period_ps))
    cdc = pd.DataFrame(rows, columns=CDC_COLUMNS)
    cdc.insert(0, "cdc_id", np.arange(len(cdc), dtype=np.int64))
    lengths = np.array([len(trace["cycle"]) for _, trace, _ in traces], dtype=np.int64)
    row_of = np.repeat(np.array([i for i, _, _ in traces], dtype=np.int64), lengths)

    def column(name: str) -> np.ndarray:
        return np.concatenate([trace[name] for _, trace, _ in traces]) if traces else []

    cycle = np.asarray(column("cycle"), dtype=np.int64)
    period_ns = np.repeat([period / 1e3 for _, _, period in traces], lengths)
    fifo = pd.DataFrame(
        {
            "sample_id": np.arange(len(cycle), dtype=np.int64),
            "link_id": cdc["link_id"].to_numpy()[row_of],
            "link": cdc["link"].to_numpy()[row_of],
            "corner": cdc["corner"].to_numpy()[row_of],
            "cycle": cycle,
            "t_ns": cycle * period_ns,
            "occupancy": np.asarray(column("occupancy"), dtype=np.int32),
            "read_view": np.asarray(column("read_view"), dtype=np.int32),
            "stop": np.asarray(column("stop"), dtype=bool),
            "written": np.asarray(column("written"), dtype=bool),
            "read": np.asarray(column("read"), dtype=bool),
            "lost": np.asarray(column("lost"), dtype=bool),
        }
    )
    for table in (cdc, fifo):
        table["link"] = table["link"].astype("category")
        table["corner"] = pd.Categorical(table["corner"], categories=list(CORNERS))
    return {"cdc": cdc, "fifo": fifo}


@dataclass
class CdcStage(Stage):
    """The CDC tables, evaluated when the stage is built: they depend on the design and the
    link rates only, never on the traffic."""

    evaluated: dict[str, pd.DataFrame]

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return self.evaluated


def _build(section: CdcSection, fabric: Fabric, wiring: Wiring, where: Locator) -> CdcStage:
    return CdcStage(cdc_tables(section, fabric, where))


STAGE = StageSpec(name="cdc", section=cdc_section, builder=_build, checker=check_cdc)

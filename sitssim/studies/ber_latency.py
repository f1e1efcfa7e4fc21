"""How a link's pre-FEC BER turns into message-latency tails: a study of one scenario, sized
so that its points see replays.

``sitssim study ber-latency SCENARIO`` sets every flit-mode link of the scenario to each
pre-FEC BER in turn and runs the points through the sweep machinery (``sitssim.sweeps``),
as ``sitssim sweep`` runs a study file. A point is only worth reading if replays actually
happen in it, so each is run long enough for at least ``min_replays`` replays to be
*expected*: from the per-flit replay probability of the BER on the scenario's lanes and
the flit rate of one error-free run of the scenario. Where that would need more than
``max_duration`` of traffic, the point runs at the scenario's own duration and is marked
"none expected". The study is one ``zip`` axis of (BER, run length) pairs, replicated over
seeds; its points, summary (means and 95 % intervals over the seeds) and figures are the
sweep's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from sitssim.link.flit import BurstModel, flit_error_rates
from sitssim.link.flit_link import TLP_BYTES_PER_FLIT
from sitssim.scenario import Scenario
from sitssim.simulation import RunResult, simulate

DEFAULT_BERS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4)
BER_PATH = "link_layer.flit.pre_fec_ber"
METRICS = (
    "data_latency_ns.p50",
    "data_latency_ns.p99",
    "data_latency_ns.p999",
    "link_layer.replays",
    "link_layer.replay_fraction",
    "delivered_GBps",
)
NONE_EXPECTED = "none expected"


@dataclass(frozen=True)
class SizedPoint:
    """One BER's run length: long enough to expect ``min_replays``, or the scenario's own."""

    pre_fec_ber: float
    p_replay_flit: float
    duration_ns: float
    expected_replays: float
    status: str


def _clean(scenario: Scenario) -> Scenario:
    flit = scenario.link_layer.flit.model_copy(update={"pre_fec_ber": None})
    return scenario.updated(link_layer=scenario.link_layer.model_copy(update={"flit": flit}))


def _replay_probability(scenario: Scenario, ber: float, result: RunResult) -> float:
    """Largest per-flit replay probability among the run's flit-mode channels (the expected
    replay count uses it for every channel, so a point is judged by its worst link)."""
    burst = scenario.link_layer.flit.burst_propagation
    lanes = {c.lanes for c in result.fabric.channels if c.encoding == "flit256"}
    return max(
        (
            float(flit_error_rates(ber, BurstModel(p_propagate=burst, lanes=n)).p_replay)
            for n in lanes
        ),
        default=0.0,
    )


def _flit_rate_per_ns(result: RunResult) -> float:
    """Flits per ns crossing the run's flit-mode channels (bytes over TLP bytes per flit)."""
    links = result.tables["links"]
    carried = links.loc[links["encoding"] == "flit256", "bytes"].sum()
    return float(carried) / TLP_BYTES_PER_FLIT / result.scenario.duration


def size_points(
    scenario: Scenario,
    bers: tuple[float, ...] = DEFAULT_BERS,
    min_replays: int = 100,
    max_duration_ns: float | None = None,
) -> list[SizedPoint]:
    """Each BER's run length, from one error-free run of ``scenario``."""
    cap = max_duration_ns if max_duration_ns is not None else 16 * scenario.duration
    clean = simulate(_clean(scenario))
    flits_per_ns = _flit_rate_per_ns(clean)
    sized = []
    for ber in bers:
        p = _replay_probability(scenario, ber, clean)
        needed = min_replays / (p * flits_per_ns) if p > 0 and flits_per_ns > 0 else math.inf
        duration = max(scenario.duration, needed) if needed <= cap else scenario.duration
        status = "ok" if needed <= cap else NONE_EXPECTED
        sized.append(SizedPoint(ber, p, duration, p * flits_per_ns * duration, status))
    return sized


def study_text(
    base: Path, name: str, sized: list[SizedPoint], replications: int, min_replays: int
) -> str:
    """The study file of the sized points: one zip axis of (BER, run length)."""
    lines = [
        f"# Pre-FEC BER against message-latency tails on {base.name}, written by",
        f"# 'sitssim study ber-latency': each run long enough to expect {min_replays} replays.",
    ]
    lines += [
        f"#   BER {p.pre_fec_ber:.3g}: {p.duration_ns:.6g} ns, {p.expected_replays:.3g} "
        f"replays expected ({p.status})"
        for p in sized
    ]
    lines += [
        f"name: {name}",
        "description: Data-message latency percentiles against every flit link's pre-FEC BER.",
        f"base: {json.dumps(str(base.resolve()))}",
        "zip:",
        f"  - {BER_PATH}: [{', '.join(repr(p.pre_fec_ber) for p in sized)}]",
        f"    duration: [{', '.join(f'{p.duration_ns!r}ns' for p in sized)}]",
        f"replications: {replications}",
        "metrics:",
        *(f"  - {m}" for m in METRICS),
    ]
    return "\n".join(lines) + "\n"

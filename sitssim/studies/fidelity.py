"""How far a flow-level run is from the packet-level run of the same scenario and seed.

Both runs see the same offered traffic where the workloads are open loop (a synthetic
schedule is drawn before the run, from the seed alone); closed loops (collectives,
inference) inject as deliveries come back, so there each run's own traffic is compared
by what it completed. Completion time is a message's latency, injection to delivery, of
the data messages (or, with none, of every kind both runs sent); a collective's is its
duration. Errors are the flow-level figure against the packet-level one, signed:
negative means the fluid model was faster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sitssim.fabric.messages import KIND_DATA, KIND_NAMES
from sitssim.scenario import Scenario
from sitssim.simulation import RunResult, simulate


@dataclass(frozen=True)
class FidelityComparison:
    """One scenario run at both fidelities."""

    scenario: str
    messages: int
    """Messages the packet-level run delivered, of the kinds both runs sent."""
    packet_mean_ns: float
    flow_mean_ns: float
    packet_p99_ns: float
    flow_p99_ns: float
    packet_wall_s: float
    flow_wall_s: float
    collective_error: float | None
    """The mean collective duration's error, where the scenario runs collectives."""

    @property
    def mean_error(self) -> float:
        return self.flow_mean_ns / self.packet_mean_ns - 1.0

    @property
    def p99_error(self) -> float:
        return self.flow_p99_ns / self.packet_p99_ns - 1.0

    @property
    def speedup(self) -> float:
        """Packet-level wall time over flow-level wall time (above 1: flow is faster)."""
        return self.packet_wall_s / self.flow_wall_s

    def row(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "messages": self.messages,
            "mean_error": self.mean_error,
            "p99_error": self.p99_error,
            "collective_error": self.collective_error,
            "speedup": self.speedup,
        }


def _latency(result: RunResult, kinds: set[str]) -> np.ndarray:
    messages = result.tables["messages"]
    mine = messages[messages["kind"].isin(kinds) & messages["t_deliver_ns"].notna()]
    return mine["latency_ns"].to_numpy()


def _compared_kinds(packet: RunResult, flow: RunResult) -> set[str]:
    """The data messages; in a scenario with none (collectives, inference), every kind
    both runs sent (a flow-level run leaves out the packet-only stages' own messages:
    clock synchronisation, LLDP probes)."""
    kinds = set(packet.tables["messages"]["kind"].astype(str)) & set(
        flow.tables["messages"]["kind"].astype(str)
    )
    data = KIND_NAMES[KIND_DATA]
    return {data} if data in kinds else kinds


def _collective_mean(result: RunResult) -> float | None:
    table = result.tables.get("collectives")
    if table is None or not len(table):
        return None
    return float(pd.to_numeric(table["duration_ns"]).mean())


def compare_fidelities(scenario: Scenario) -> FidelityComparison:
    """Run ``scenario`` at packet and at flow fidelity and compare their completion times."""
    runs: dict[str, tuple[RunResult, float]] = {}
    for fidelity in ("packet", "flow"):
        start = time.perf_counter()
        result = simulate(scenario.updated(fidelity=fidelity))
        runs[fidelity] = (result, time.perf_counter() - start)
    (packet, packet_s), (flow, flow_s) = runs["packet"], runs["flow"]
    kinds = _compared_kinds(packet, flow)
    lat_p, lat_f = _latency(packet, kinds), _latency(flow, kinds)
    coll_p, coll_f = _collective_mean(packet), _collective_mean(flow)
    return FidelityComparison(
        scenario=scenario.name,
        messages=len(lat_p),
        packet_mean_ns=float(lat_p.mean()),
        flow_mean_ns=float(lat_f.mean()),
        packet_p99_ns=float(np.quantile(lat_p, 0.99)),
        flow_p99_ns=float(np.quantile(lat_f, 0.99)),
        packet_wall_s=packet_s,
        flow_wall_s=flow_s,
        collective_error=None if coll_p is None or coll_f is None else coll_f / coll_p - 1.0,
    )

"""Built-in oracles: bounds no correct run can beat, computed for every run.

* **Zero-load latency** of a message: serialisation on every channel of its
  route, plus each link's flight time and each forwarding node's arbitration
  latency. Queueing can only add to it.
* **Throughput bound** over the traffic phase [0, T]: the largest aggregate
  rate a fabric with these routes could deliver for the traffic actually
  offered. It is the linear programme

      maximise  sum_f x_f   s.t.  0 <= x_f <= offered_f / T   (per flow f)
                                  sum_{f through c} x_f <= bandwidth_c

  Delivered bytes per flow within T form a feasible point (a message that
  was delivered by T was injected by T and was serialised on every channel of
  its route by T), so delivered throughput can never exceed the optimum.
  With very many flows the LP is replaced by the weaker endpoint bound
  (per-source injection and per-destination ejection bandwidth).
* **Channel headroom** (Dally & Towles' channel-load bound): the factor by
  which the offered traffic could grow before its most loaded channel
  saturates; below 1 the offered load exceeds what the routes can carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from sitssim.fabric.routing import Route
from sitssim.fabric.topology import Fabric

LP_MAX_FLOWS = 20_000


def zero_load_latency_ns(
    fabric: Fabric, routes: list[Route], route_ids: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """Per message: the latency it would see in an empty fabric (ns)."""
    inv_bw = np.zeros(len(routes))
    fixed = np.zeros(len(routes))
    for r in routes:
        for c in r.channels:
            ch = fabric.channels[c]
            inv_bw[r.id] += 1.0 / ch.bytes_per_ns
            fixed[r.id] += ch.propagation_ns + fabric.node_latency_ns[ch.dst]
    return sizes * inv_bw[route_ids] + fixed[route_ids]


@dataclass(frozen=True)
class ThroughputBound:
    offered_bytes_per_ns: float
    bound_bytes_per_ns: float
    method: str
    headroom: float
    bottleneck_channel: str | None


def throughput_bound(
    fabric: Fabric, routes: list[Route], messages: pd.DataFrame, window_ns: float
) -> ThroughputBound:
    """Bound on the aggregate delivered rate within [0, window_ns] (bytes/ns = GB/s)."""
    inside = messages[messages["t_inject_ns"] <= window_ns]
    per_route = inside.groupby("route", observed=True)["bytes"].sum()
    if per_route.empty:
        return ThroughputBound(0.0, 0.0, "no traffic", float("inf"), None)
    route_ids = per_route.index.to_numpy()
    demand = per_route.to_numpy(dtype=float) / window_ns
    bandwidth = np.array([c.bytes_per_ns for c in fabric.channels])

    rows, cols = [], []
    for j, r in enumerate(route_ids):
        for c in routes[r].channels:
            rows.append(c)
            cols.append(j)
    incidence = coo_matrix(
        (np.ones(len(rows)), (rows, cols)), shape=(len(bandwidth), len(route_ids))
    ).tocsr()
    load = incidence @ demand
    used = load > 0
    ratios = np.full(len(bandwidth), np.inf)
    ratios[used] = bandwidth[used] / load[used]
    worst = int(np.argmin(ratios))
    headroom = float(ratios[worst])
    bottleneck = fabric.channels[worst].name if np.isfinite(headroom) else None

    offered = float(demand.sum())
    if len(route_ids) <= LP_MAX_FLOWS:
        result = linprog(
            -np.ones(len(route_ids)),
            A_ub=incidence[used],
            b_ub=bandwidth[used],
            bounds=list(zip(np.zeros(len(demand)), demand, strict=True)),
            method="highs",
        )
        if result.status == 0:
            return ThroughputBound(
                offered, float(-result.fun), "channel-load LP", headroom, bottleneck
            )
    src_bw = inside.groupby("src", observed=True)["bytes"].sum() / window_ns
    dst_bw = inside.groupby("dst", observed=True)["bytes"].sum() / window_ns
    out_bw = {c.src: 0.0 for c in fabric.channels}
    in_bw = {c.dst: 0.0 for c in fabric.channels}
    for c in fabric.channels:
        out_bw[c.src] += c.bytes_per_ns
        in_bw[c.dst] += c.bytes_per_ns
    by_src = sum(min(v, out_bw[k]) for k, v in src_bw.items())
    by_dst = sum(min(v, in_bw[k]) for k, v in dst_bw.items())
    return ThroughputBound(offered, min(offered, by_src, by_dst), "endpoint", headroom, bottleneck)

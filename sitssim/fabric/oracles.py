"""Built-in oracles: bounds no correct run can beat, computed for every run.

* **Zero-load latency** of a message: serialisation on every channel of its
  route, plus each link's flight time and each forwarding node's arbitration
  latency. Queueing can only add to it. Where switches forward by virtual
  cut-through, it follows the ports' rule (``sitssim.fabric.ports``) hop by hop:
  a cut-through node forwards once the message's head is in, and its output
  finishes no earlier than the tail has arrived; so a message pays its
  serialisation once on equal links, not once per hop.
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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from sitssim.fabric.routing import Route
from sitssim.fabric.topology import Fabric

LP_MAX_FLOWS = 20_000


def zero_load_latency_ns(
    fabric: Fabric,
    routes: list[Route],
    route_ids: np.ndarray,
    sizes: np.ndarray,
    cut_through_bytes: Mapping[str, int] | None = None,
) -> np.ndarray:
    """Per message: the latency it would see in an empty fabric (ns).

    ``cut_through_bytes``: the nodes that forward by virtual cut-through, each with how much
    of a message it needs before forwarding it; none, or empty: every node stores and
    forwards.
    """
    if cut_through_bytes:
        return _cut_through_zero_load(fabric, routes, route_ids, sizes, cut_through_bytes)
    inv_bw = np.zeros(len(routes))
    fixed = np.zeros(len(routes))
    for r in routes:
        for c in r.channels:
            ch = fabric.channels[c]
            inv_bw[r.id] += 1.0 / ch.bytes_per_ns
            fixed[r.id] += ch.propagation_ns + fabric.node_latency_ns[ch.dst]
    return sizes * inv_bw[route_ids] + fixed[route_ids]


def _cut_through_zero_load(
    fabric: Fabric,
    routes: list[Route],
    route_ids: np.ndarray,
    sizes: np.ndarray,
    cut: Mapping[str, int],
) -> np.ndarray:
    """The ports' recurrence at zero load, one hop at a time over every message at once.

    At each hop: ``end = start + size / bw``, no earlier than the tail reached the near node
    if that node cuts through; the tail reaches the far node at ``end + flight + latency``,
    and the next hop starts then, or, if the far node cuts through and is not the
    destination, when the head is in: ``start + head_bytes / bw + flight + latency``.
    """
    channels = fabric.channels
    inv = np.array([1.0 / c.bytes_per_ns for c in channels])
    fwd = np.array([c.propagation_ns + fabric.node_latency_ns[c.dst] for c in channels])
    head_bytes = np.array([float(cut.get(c.dst, 0)) for c in channels])
    from_cut = np.array([c.src in cut for c in channels])
    longest = max((len(r.channels) for r in routes), default=0)
    hop_channel = np.full((len(routes), longest), -1, dtype=np.int64)
    for r in routes:
        hop_channel[r.id, : len(r.channels)] = r.channels
    per_msg = hop_channel[route_ids] if len(route_ids) else np.zeros((0, longest), np.int64)
    n_hops = (per_msg >= 0).sum(axis=1)
    size = np.asarray(sizes, dtype=float)
    start = np.zeros(len(size))
    tail_in = np.zeros(len(size))
    latency = np.zeros(len(size))
    for j in range(longest):
        c = per_msg[:, j]
        on = c >= 0
        c = np.where(on, c, 0)
        end = start + size * inv[c]
        if j:
            end = np.where(from_cut[c], np.maximum(end, tail_in), end)
        tail = end + fwd[c]
        head = start + head_bytes[c] * inv[c] + fwd[c]
        cuts = (head_bytes[c] > 0) & (j < n_hops - 1)
        nxt = np.where(cuts, np.minimum(head, tail), tail)
        start = np.where(on, nxt, start)
        tail_in = np.where(on, tail, tail_in)
        latency = np.where(on & (j == n_hops - 1), tail, latency)
    return latency


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

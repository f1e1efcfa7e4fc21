"""The input-queued switches' tables, replayed after the run from what each one recorded.

A switch records one ``log`` record per message that crossed it and two allocation
counters (``sitssim.switch.input_queued``, "Recording"); everything here is derived from
those, the engine's per-message columns (VC, tenant, size) and the ``credits`` table, so
the hot path pays for nothing it does not need. A *port* is a switch's end of one link,
named by its peer (as the ``vc_quota`` tables name it): its input side is the buffer fed
by the channel from the peer, its output side the channel to the peer. The switch's own
traffic enters through the management input, named :data:`MANAGEMENT`.

Tables (times on the traffic clock, ns):

* ``vc``: per (switch, port, VC): tenants seen, messages and bytes into the buffer, its
  peak and time-weighted mean occupancy (over ``[0, span]``), the mean and longest wait
  from arrival to crossing, messages still waiting at the end, and the credit stalls
  (count, time) of the port's output side on that VC, from the ``credits`` table's
  ``vc`` column. A port appears if its buffer took a message on that VC or its output
  stalled on it.
* ``vc_tenants``: the same buffer traffic split by tenant: messages, bytes, mean wait.
* ``vc_occupancy``: each buffer's occupancy over time, one row per instant at which it
  changed: ``occupancy`` after the instant's changes, ``instant_peak`` the highest it
  reached then (arrivals come before the crossings at an instant, since the allocation
  runs after them), so ``instant_peak``'s maximum is the buffer's peak, and
  ``occupancy`` held from one row to the next is the series the mean integrates.
* ``switch_arbitration``: per switch: allocations, requests (inputs asking), grants,
  requests unmatched for want of an output or of credit (``requests = grants +
  unmatched_output + unmatched_credit``), the mean matching size (grants per
  allocation), the peak occupancy, and fairness: per output, Jain's index of the
  crossings of the inputs that used it, (Σx)² / (k·Σx²), 1 when they shared it equally
  (a fairness of service, so of arbitration only when the inputs offered alike); the
  least and the mean over outputs.
* ``switch_crossings``: per (switch, input port, output port): crossings and their share
  of that output's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sitssim.fabric.topology import Fabric
from sitssim.switch.input_queued import InputQueuedSwitch

MANAGEMENT = "(management)"
"""The port name of a switch's management input, through which its own traffic enters."""

_RECORD = 5  # numbers per log record: t_in, t_out, input, msg, output
_SERIES_COLUMNS = ("input", "vc", "t_ns", "occupancy", "instant_peak")

VC_COLUMNS = [
    "switch",
    "port",
    "link",
    "vc",
    "tenants",
    "messages",
    "bytes",
    "peak_occupancy",
    "mean_occupancy",
    "mean_wait_ns",
    "max_wait_ns",
    "waiting_at_end",
    "credit_stalls",
    "credit_stall_ns",
]
VC_TENANT_COLUMNS = ["switch", "port", "vc", "tenant", "messages", "bytes", "mean_wait_ns"]
OCCUPANCY_COLUMNS = ["switch", "port", "vc", "t_ns", "occupancy", "instant_peak"]
ARBITRATION_COLUMNS = [
    "switch",
    "inputs",
    "outputs",
    "allocations",
    "requests",
    "grants",
    "unmatched_output",
    "unmatched_credit",
    "mean_matching",
    "peak_occupancy",
    "jain_min",
    "jain_mean",
]
CROSSING_COLUMNS = ["switch", "input", "output", "crossings", "output_share"]


@dataclass(frozen=True)
class MessageColumns:
    """The engine's per-message columns the tables read, indexed by message id."""

    vc: np.ndarray
    tenant: np.ndarray
    size: np.ndarray
    tenant_names: tuple[str, ...]


def visits(switch: InputQueuedSwitch) -> pd.DataFrame:
    """One row per message that entered ``switch``'s buffers: ``input``, ``msg``,
    ``t_in``, ``t_out`` and ``output`` (NaN and -1 for one still waiting)."""
    log = np.asarray(switch.log, dtype=float).reshape(-1, _RECORD)
    left = switch.waiting()
    if left:
        rest = np.array([(t, np.nan, i, msg, -1) for t, i, msg in left], dtype=float)
        log = np.vstack([log, rest])
    return pd.DataFrame(
        {
            "input": log[:, 2].astype(np.int64),
            "msg": log[:, 3].astype(np.int64),
            "t_in": log[:, 0],
            "t_out": log[:, 1],
            "output": log[:, 4].astype(np.int64),
        }
    )


def occupancy(visited: pd.DataFrame, vc: np.ndarray) -> pd.DataFrame:
    """Each (input, VC) buffer's occupancy at every instant it changed, from ``visits``:
    ``input``, ``vc``, ``t_ns``, ``occupancy`` (after the instant), ``instant_peak``."""
    crossed = visited["output"].to_numpy() >= 0
    inputs = visited["input"].to_numpy()
    lanes = vc[visited["msg"].to_numpy()].astype(np.int64)
    n_in = len(inputs)
    # Every arrival, then every crossing, as changes of +1 and -1.
    port = np.concatenate([inputs, inputs[crossed]])
    lane = np.concatenate([lanes, lanes[crossed]])
    t = np.concatenate([visited["t_in"].to_numpy(), visited["t_out"].to_numpy()[crossed]])
    departs = np.arange(len(t)) >= n_in
    if not len(t):
        return pd.DataFrame(
            {c: np.zeros(0, float if c == "t_ns" else np.int64) for c in _SERIES_COLUMNS}
        )
    # By buffer, then time; at one instant the arrivals come first: the allocation runs
    # after them.
    order = np.lexsort((departs, t, lane, port))
    port, lane, t = port[order], lane[order], t[order]
    delta = np.where(departs[order], -1, 1)
    first = np.r_[True, (port[1:] != port[:-1]) | (lane[1:] != lane[:-1])]
    total = np.cumsum(delta)
    # Each buffer's count starts at 0: less the running total before its first change.
    lane_first = np.maximum.accumulate(np.where(first, np.arange(len(t)), 0))
    level = total - (total - delta)[lane_first]
    starts = np.flatnonzero(first | np.r_[True, t[1:] != t[:-1]])
    ends = np.r_[starts[1:], len(t)] - 1
    return pd.DataFrame(
        {
            "input": port[starts],
            "vc": lane[starts],
            "t_ns": t[starts],
            "occupancy": level[ends],
            "instant_peak": np.maximum.reduceat(level, starts),
        }
    )


def time_weighted_mean(series: pd.DataFrame, span_ns: float) -> pd.Series:
    """Per (input, VC), the mean of ``occupancy`` held from each row to the next (the
    last to ``span_ns``) over ``[0, span_ns]``; 0 for an empty span."""
    if series.empty:
        return pd.Series(dtype=float)
    t = series["t_ns"].to_numpy()
    lane = series.groupby(["input", "vc"], sort=False)
    following = lane["t_ns"].shift(-1).to_numpy()
    end = np.maximum(span_ns, t.max())
    held = np.where(np.isnan(following), end, following) - t
    area = pd.Series(series["occupancy"].to_numpy() * held, index=series.index)
    total = area.groupby([series["input"], series["vc"]], sort=False).sum()
    return total / end if end > 0 else total * 0.0


def _jain(counts: np.ndarray) -> float:
    return float(counts.sum() ** 2 / (len(counts) * (counts**2).sum()))


def switch_tables(
    switches: Sequence[InputQueuedSwitch],
    fabric: Fabric,
    messages: MessageColumns,
    credits: pd.DataFrame | None,
    span_ns: float,
) -> dict[str, pd.DataFrame]:
    """The five tables (module docstring) of ``switches`` (in name order, as the transport
    holds them) after a run of ``span_ns``; rows by switch, port name and VC."""
    channels = fabric.channels
    lanes, tenants, series, arbitration, crossings = [], [], [], [], []
    # Each output's channel, by id: the (switch, port) its credit stalls belong to.
    stall_ports: dict[int, tuple[str, str]] = {}
    for sw in switches:
        ins = [MANAGEMENT if p is None else channels[p.channel].src for p in sw.in_ports]
        links = ["" if p is None else channels[p.channel].name for p in sw.in_ports]
        outs = [channels[p.channel].dst for p in sw.out_ports]
        for p in sw.out_ports:
            stall_ports[p.channel] = (sw.name, channels[p.channel].dst)
        visited = visits(sw)
        visited["vc"] = messages.vc[visited["msg"].to_numpy()]
        visited["tenant"] = messages.tenant[visited["msg"].to_numpy()]
        visited["bytes"] = messages.size[visited["msg"].to_numpy()]
        visited["wait"] = visited["t_out"] - visited["t_in"]
        visited["waiting"] = visited["output"] < 0
        occ = occupancy(visited, messages.vc)
        mean = time_weighted_mean(occ, span_ns)
        peak = occ.groupby(["input", "vc"], sort=False)["instant_peak"].max()
        per_lane = visited.groupby(["input", "vc"], sort=True)
        stats = per_lane.agg(
            messages=("msg", "size"),
            bytes=("bytes", "sum"),
            mean_wait_ns=("wait", "mean"),
            max_wait_ns=("wait", "max"),
            waiting_at_end=("waiting", "sum"),
        )
        seen = per_lane["tenant"].agg(
            lambda t: ",".join(messages.tenant_names[k] for k in sorted(set(t)))
        )
        for (i, vc), row in stats.iterrows():
            lanes.append(
                {
                    "switch": sw.name,
                    "port": ins[i],
                    "link": links[i],
                    "vc": int(vc),
                    "tenants": seen[(i, vc)],
                    "messages": int(row["messages"]),
                    "bytes": int(row["bytes"]),
                    "peak_occupancy": int(peak[(i, vc)]),
                    "mean_occupancy": float(mean[(i, vc)]),
                    "mean_wait_ns": float(row["mean_wait_ns"]),
                    "max_wait_ns": float(row["max_wait_ns"]),
                    "waiting_at_end": int(row["waiting_at_end"]),
                }
            )
        by_tenant = visited.groupby(["input", "vc", "tenant"], sort=True).agg(
            messages=("msg", "size"), bytes=("bytes", "sum"), mean_wait_ns=("wait", "mean")
        )
        for (i, vc, tenant), row in by_tenant.iterrows():
            tenants.append(
                (
                    sw.name,
                    ins[i],
                    int(vc),
                    messages.tenant_names[tenant],
                    int(row["messages"]),
                    int(row["bytes"]),
                    float(row["mean_wait_ns"]),
                )
            )
        if not occ.empty:
            # Ports in name order; a stable sort keeps each buffer's rows in time order, so
            # the whole series, switch after switch, needs no sort of its own.
            name_rank = np.argsort(np.argsort(np.array(ins, dtype=object), kind="stable"))
            rows = np.argsort(name_rank[occ["input"].to_numpy()], kind="stable")
            occ = occ.iloc[rows]
            series.append(
                pd.DataFrame(
                    {
                        "switch": sw.name,
                        "port": np.array(ins, dtype=object)[occ["input"].to_numpy()],
                        "vc": occ["vc"].to_numpy(),
                        "t_ns": occ["t_ns"].to_numpy(),
                        "occupancy": occ["occupancy"].to_numpy(),
                        "instant_peak": occ["instant_peak"].to_numpy(),
                    }
                )
            )
        crossed = visited[~visited["waiting"]]
        pairs = crossed.groupby(["output", "input"], sort=True).size()
        jains = [_jain(pairs[o].to_numpy()) for o in pairs.index.unique(level="output")]
        per_output = pairs.groupby(level="output").sum()
        for (o, i), n in pairs.items():
            crossings.append((sw.name, ins[i], outs[o], int(n), float(n / per_output[o])))
        grants = len(crossed)
        arbitration.append(
            (
                sw.name,
                len(sw.in_ports),
                len(sw.out_ports),
                sw.allocations,
                sw.requests,
                grants,
                sw.requests - grants - sw.refused,
                sw.refused,
                grants / sw.allocations if sw.allocations else 0.0,
                int(peak.max()) if len(peak) else 0,
                min(jains) if jains else np.nan,
                float(np.mean(jains)) if jains else np.nan,
            )
        )
    vc_table = _with_stalls(
        pd.DataFrame(lanes, columns=VC_COLUMNS[:-2]), credits, stall_ports, fabric
    )
    empty_series = pd.DataFrame(
        {
            "switch": pd.Series(dtype=object),
            "port": pd.Series(dtype=object),
            **{c: pd.Series(dtype=np.int64) for c in ("vc", "occupancy", "instant_peak")},
            "t_ns": pd.Series(dtype=float),
        }
    )[OCCUPANCY_COLUMNS]
    return {
        "vc": vc_table,
        "vc_tenants": _sorted(pd.DataFrame(tenants, columns=VC_TENANT_COLUMNS)),
        "vc_occupancy": pd.concat(series, ignore_index=True) if series else empty_series,
        "switch_arbitration": pd.DataFrame(arbitration, columns=ARBITRATION_COLUMNS),
        "switch_crossings": pd.DataFrame(crossings, columns=CROSSING_COLUMNS)
        .sort_values(["switch", "input", "output"], kind="stable")
        .reset_index(drop=True),
    }


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by switch, port name and VC (then time or tenant, already in order)."""
    return table.sort_values(["switch", "port", "vc"], kind="stable").reset_index(drop=True)


def _with_stalls(
    lanes: pd.DataFrame,
    credits: pd.DataFrame | None,
    ports: dict[int, tuple[str, str]],
    fabric: Fabric,
) -> pd.DataFrame:
    """``lanes`` with each port's output-side credit stalls per VC, adding a row (no
    buffer traffic) for a (port, VC) that stalled and took nothing in."""
    keys = ["switch", "port", "vc"]
    stalls = pd.DataFrame(columns=[*keys, "credit_stalls", "credit_stall_ns"])
    if credits is not None and not credits.empty:
        mine = credits[credits["link_id"].isin(list(ports))]
        if not mine.empty:
            where = [ports[c] for c in mine["link_id"].tolist()]
            stalls = (
                pd.DataFrame(
                    {
                        "switch": [s for s, _ in where],
                        "port": [p for _, p in where],
                        "vc": mine["vc"].to_numpy(dtype=np.int64),
                        "ns": (mine["end_ns"] - mine["start_ns"]).to_numpy(),
                    }
                )
                .groupby(keys, sort=True)["ns"]
                .agg(credit_stalls="size", credit_stall_ns="sum")
                .reset_index()
            )
    table = lanes.merge(stalls, on=keys, how="outer")
    counts = ["messages", "bytes", "peak_occupancy", "waiting_at_end", "credit_stalls"]
    table[counts] = table[counts].fillna(0).astype(np.int64)
    table[["mean_occupancy", "credit_stall_ns"]] = (
        table[["mean_occupancy", "credit_stall_ns"]].fillna(0.0).astype(float)
    )
    table["tenants"] = table["tenants"].fillna("")
    # A row from the stalls alone names its input channel too (the link from the peer).
    missing = table["link"].isna()
    table.loc[missing, "link"] = [
        fabric.channels[fabric.channel_index[(port, sw)]].name
        for sw, port in zip(table.loc[missing, "switch"], table.loc[missing, "port"], strict=True)
    ]
    table["vc"] = table["vc"].astype(np.int64)
    return _sorted(table[VC_COLUMNS])

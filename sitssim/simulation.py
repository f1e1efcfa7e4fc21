"""One run: scenario -> fabric -> stages -> transport -> tables -> oracles -> verdicts -> metrics.

The orchestrator is a loop over the stage registry (:mod:`sitssim.stages.registry`); what
it owns itself is the transport and its own tables (messages, probes, links, nodes,
config) and figures, which every stage's come after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import simpy

from sitssim.fabric.carrier import Carrier
from sitssim.fabric.flow_transport import FlowTransport
from sitssim.fabric.messages import (
    KIND_DATA,
    KIND_NAMES,
    KIND_PROBE_COMPLETION,
    KIND_PROBE_REQUEST,
)
from sitssim.fabric.nodes import Node
from sitssim.fabric.oracles import ThroughputBound, throughput_bound, zero_load_latency_ns
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric
from sitssim.fabric.transport import Transport
from sitssim.preflight import preflight
from sitssim.scenario import Scenario
from sitssim.spec.registry import RunContext, Verdict, judge_all
from sitssim.stages.base import Finished, Stage, Wiring
from sitssim.stages.registry import STAGES
from sitssim.summaries import sample_summary
from sitssim.switch.registry import switch_model
from sitssim.switch.saturation import saturation_metrics

# Oracle comparisons allow for float rounding along a route's sum of delays.
ORACLE_RTOL = 1e-9


@dataclass
class RunResult:
    scenario: Scenario
    seed: int
    fabric: Fabric
    tables: dict[str, pd.DataFrame]
    verdicts: list[Verdict]
    metrics: dict[str, object]
    simulated_ns: float
    throughput: ThroughputBound
    phase_wall_s: dict[str, float] = field(default_factory=dict)
    """Wall seconds of each phase of the run (preflight, build, simulate, tables,
    judge): where the time went, for run_info.json and benchmarks, never report.json."""

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == "fail"]


def _messages_table(
    transport: Carrier, router: Router, fabric: Fabric, scenario: Scenario
) -> pd.DataFrame:
    route = np.asarray(transport.route_ids(), dtype=np.int64)
    size = np.asarray(transport.size, dtype=np.int64)
    t_inject = np.asarray(transport.t_inject, dtype=float)
    t_deliver = np.asarray(transport.t_deliver, dtype=float)
    hops = np.array([r.hops for r in router.routes], dtype=np.int64)
    paths = [r.text for r in router.routes]
    nodes = transport.nodes
    tenants = [t.name for t in scenario.tenants]
    return pd.DataFrame(
        {
            "msg_id": np.arange(len(size), dtype=np.int64),
            "kind": pd.Categorical.from_codes(
                np.asarray(transport.kind, dtype=np.int64),
                categories=list(KIND_NAMES),
            ),
            "workload": np.asarray(transport.workload, dtype=np.int64),
            "src": pd.Categorical.from_codes(
                np.asarray(transport.src, dtype=np.int64), categories=nodes
            ),
            "dst": pd.Categorical.from_codes(
                np.asarray(transport.dst, dtype=np.int64), categories=nodes
            ),
            "bytes": size,
            "tenant": pd.Categorical.from_codes(
                np.asarray(transport.tenant, dtype=np.int64), categories=tenants
            ),
            "vc": np.asarray(transport.vc, dtype=np.int64),
            "t_inject_ns": t_inject,
            "t_deliver_ns": t_deliver,
            "latency_ns": t_deliver - t_inject,
            "zero_load_ns": zero_load_latency_ns(
                fabric,
                router.routes,
                route,
                size,
                transport.cut_through,
            ),
            "hops": hops[route] if len(route) else np.zeros(0, dtype=np.int64),
            "route": route,
            "path": pd.Categorical.from_codes(route, categories=paths)
            if paths
            else pd.Categorical([]),
            "parent": np.asarray(transport.parent, dtype=np.int64),
        }
    )


def _probes_table(messages: pd.DataFrame) -> pd.DataFrame:
    requests = messages[messages["kind"] == KIND_NAMES[KIND_PROBE_REQUEST]]
    completions = messages[messages["kind"] == KIND_NAMES[KIND_PROBE_COMPLETION]]
    done = completions.set_index("parent")["t_deliver_ns"]
    completion_id = completions.set_index("parent")["msg_id"]
    t_done = done.reindex(requests["msg_id"]).to_numpy()
    return pd.DataFrame(
        {
            "probe_id": requests["msg_id"].to_numpy(),
            "src": requests["src"].to_numpy(),
            "dst": requests["dst"].to_numpy(),
            "hops": requests["hops"].to_numpy(),
            "t_issue_ns": requests["t_inject_ns"].to_numpy(),
            "rtt_ns": t_done - requests["t_inject_ns"].to_numpy(),
            "completion_id": completion_id.reindex(requests["msg_id"])
            .fillna(-1)
            .astype(np.int64)
            .to_numpy(),
        }
    )


def _links_table(transport: Carrier, fabric: Fabric, span_ns: float) -> pd.DataFrame:
    ports = transport.ports
    channels = fabric.channels
    return pd.DataFrame(
        {
            "link_id": [c.id for c in channels],
            "name": [c.name for c in channels],
            "src": [c.src for c in channels],
            "dst": [c.dst for c in channels],
            "profile": [c.profile for c in channels],
            "rate_gts": [c.rate_gts for c in channels],
            "lanes": [c.lanes for c in channels],
            "links": [c.links for c in channels],
            "encoding": [c.encoding for c in channels],
            "bytes_per_ns": [c.bytes_per_ns for c in channels],
            "propagation_ns": [c.propagation_ns for c in channels],
            "messages": [p.messages for p in ports],
            "bytes": [p.bytes for p in ports],
            "busy_ns": [p.busy_ns for p in ports],
            "utilisation": [p.busy_ns / span_ns if span_ns > 0 else 0.0 for p in ports],
        }
    )


def _links_by_tenant_table(messages: pd.DataFrame, router: Router, fabric: Fabric) -> pd.DataFrame:
    """Delivered traffic per channel, tenant and VC: one row for each (channel, tenant, VC)
    that carried any, each delivered message counted once on every channel of its route.

    Derived from the messages table after the run (messages are grouped by route, tenant
    and VC first, then each group is spread over its route's channels), so the ports keep
    one counter each on the hot path. Summed over tenants and VCs it is the ``links``
    table's messages and bytes when every message was delivered. A message still in
    flight at the end has crossed only part of its route, and no table says which part,
    so it is left out here while ``links`` counts the channels it did cross.
    """
    delivered = messages[messages["t_deliver_ns"].notna()]
    per_route = (
        pd.DataFrame(
            {
                "route": delivered["route"].to_numpy(),
                "tenant": delivered["tenant"].cat.codes.to_numpy(dtype=np.int64),
                "vc": delivered["vc"].to_numpy(),
                "bytes": delivered["bytes"].to_numpy(),
            }
        )
        .groupby(["route", "tenant", "vc"], sort=True)["bytes"]
        .agg(messages="size", bytes="sum")
        .reset_index()
    )
    routes = router.routes
    route_of_group = per_route["route"].to_numpy()
    lengths = np.array([len(routes[r].channels) for r in route_of_group], dtype=np.int64)
    on_channels = pd.DataFrame(
        {
            "link_id": np.fromiter(
                (c for r in route_of_group for c in routes[r].channels),
                dtype=np.int64,
                count=int(lengths.sum()),
            ),
            **{
                column: np.repeat(per_route[column].to_numpy(dtype=np.int64), lengths)
                for column in ("tenant", "vc", "messages", "bytes")
            },
        }
    )
    table = (
        on_channels.groupby(["link_id", "tenant", "vc"], sort=True)[["messages", "bytes"]]
        .sum()
        .reset_index()
    )
    names = [c.name for c in fabric.channels]
    link_ids = table["link_id"].to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "link_id": link_ids,
            "name": [names[i] for i in link_ids],
            "tenant": pd.Categorical.from_codes(
                table["tenant"].to_numpy(dtype=np.int64),
                categories=messages["tenant"].cat.categories,
            ),
            "vc": table["vc"].to_numpy(dtype=np.int64),
            "messages": table["messages"].to_numpy(dtype=np.int64),
            "bytes": table["bytes"].to_numpy(dtype=np.int64),
        }
    )


def _nodes_table(fabric: Fabric) -> pd.DataFrame:
    names = sorted(fabric.graph)
    g = fabric.graph
    return pd.DataFrame(
        {
            "node_id": np.arange(len(names), dtype=np.int64),
            "node": names,
            "kind": [g.nodes[n]["kind"] for n in names],
            "level": [g.nodes[n].get("level", 0) for n in names],
            "degree": [g.degree(n) for n in names],
            "arbitration_ns": [fabric.node_latency_ns[n] for n in names],
        }
    )


def _config_table(scenario: Scenario) -> pd.DataFrame:
    """The configured values a clause is judged against, as one row (NaN: not configured),
    and what the run modelled its messages as: judges read tables, never the scenario."""
    window = scenario.root_complex.tso_window
    return pd.DataFrame(
        {
            "tso_window_ns": [np.nan if window is None else float(window)],
            "fidelity": [scenario.fidelity],
        }
    )


def _quantiles(values: np.ndarray) -> dict[str, float | None]:
    return sample_summary(values, ("mean", "p50", "p99", "p999", "max"))


def _metrics(
    result_tables: dict[str, pd.DataFrame],
    bound: ThroughputBound,
    scenario: Scenario,
    simulated_ns: float,
) -> dict[str, object]:
    messages = result_tables["messages"]
    data = messages[messages["kind"] == KIND_NAMES[KIND_DATA]]
    window = scenario.duration
    delivered_in_window = messages.loc[messages["t_deliver_ns"] <= window, "bytes"].sum()
    slack = (messages["latency_ns"] - messages["zero_load_ns"]).to_numpy()
    tolerance = ORACLE_RTOL * messages["zero_load_ns"].to_numpy()
    probes = result_tables["probes"]
    links = result_tables["links"]
    return {
        "messages": len(messages),
        "data_messages": len(data),
        "data_latency_ns": _quantiles(data["latency_ns"].to_numpy()),
        "data_zero_load_ns": _quantiles(data["zero_load_ns"].to_numpy()),
        "latency_by_kind_ns": {
            str(kind): _quantiles(group["latency_ns"].to_numpy())
            for kind, group in messages.groupby("kind", observed=True)
        },
        "probe_rtt_ns": _quantiles(probes["rtt_ns"].dropna().to_numpy()),
        "oracle_latency_violations": int((slack < -tolerance).sum()),
        "offered_GBps": bound.offered_bytes_per_ns,
        "delivered_GBps": float(delivered_in_window) / window,
        "throughput_bound_GBps": bound.bound_bytes_per_ns,
        "throughput_bound_method": bound.method,
        "channel_headroom": bound.headroom if np.isfinite(bound.headroom) else None,
        "bottleneck_channel": bound.bottleneck_channel,
        "max_link_utilisation": float(links["utilisation"].max()) if len(links) else 0.0,
        "simulated_ns": simulated_ns,
    }


def _merge_metrics(metrics: dict[str, object], sections: dict[str, object]) -> None:
    """Add a stage's metric sections; one already there (a dict) is extended in place."""
    for key, value in sections.items():
        held = metrics.get(key)
        if isinstance(held, dict) and isinstance(value, dict):
            metrics[key] = {**held, **value}
        else:
            metrics[key] = value


def _packet_transport(
    fabric: Fabric, router: Router, nodes: list[str], wiring: Wiring, switch: type[Node]
) -> Carrier:
    return Transport(
        simpy.Environment(),
        fabric,
        router,
        nodes,
        wiring.schedule,
        wiring.flit_links,
        wiring.credit_links,
        switch,
        wiring.message_vcs,
        answered_kinds=wiring.answered_kinds,
        answer_slots=wiring.answer_slots,
    )


def _flow_transport(
    fabric: Fabric, router: Router, nodes: list[str], wiring: Wiring, switch: type[Node]
) -> Carrier:
    return FlowTransport(
        simpy.Environment(),
        fabric,
        router,
        nodes,
        wiring.schedule,
        wiring.message_vcs,
        cut_through_bytes=switch.cut_through_bytes,
    )


TRANSPORTS: dict[str, Callable[[Fabric, Router, list[str], Wiring, type[Node]], Carrier]] = {
    "packet": _packet_transport,
    "flow": _flow_transport,
}
"""The transport of each ``fidelity``, built from what the stages wired and the switch model."""


class _PhaseClock:
    """Wall time per phase, each lap from the end of the one before."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = now - self._t
        self._t = now


def simulate(
    scenario: Scenario,
    seed: int | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> RunResult:
    """Simulate a scenario and judge every clause. ``seed`` overrides the scenario's.

    preflight, build every stage (registry order), build the transport from what they
    wired, start each stage on it, run, then the transport's own tables followed by each
    stage's, the verdicts, and the metrics likewise.
    """
    if seed is not None and seed != scenario.seed:
        scenario = scenario.updated(seed=seed)
    clock = _PhaseClock()
    fabric = preflight(scenario).fabric
    clock.lap("preflight")
    nodes = sorted(fabric.graph)
    wiring = Wiring(node_id={n: i for i, n in enumerate(nodes)})
    fluid = scenario.fidelity == "flow"
    stages: list[Stage] = [
        spec.build(scenario, fabric, wiring) for spec in STAGES if not (fluid and spec.packet_only)
    ]
    router = Router(fabric)
    transport = TRANSPORTS[scenario.fidelity](
        fabric, router, nodes, wiring, switch_model(scenario.switch, wiring.vc_slots)
    )
    for stage in stages:
        stage.start(transport)
    clock.lap("build")
    transport.run(progress)
    clock.lap("simulate")
    # A run a watchdog stopped is not idle: the idle invariants (every credit back, every
    # answer sent) do not apply to it, and what stopped it is in its stage's tables.
    if transport.stopped is None:
        for stage in stages:
            stage.finish()
    delivered = np.asarray(transport.t_deliver, dtype=float)
    simulated_ns = float(max(scenario.duration, delivered.max() if len(delivered) else 0.0))
    simulated_ns = max([simulated_ns, *(stage.end_ns() for stage in stages)])

    tables: dict[str, pd.DataFrame] = {}
    tables["messages"] = _messages_table(transport, router, fabric, scenario)
    tables["probes"] = _probes_table(tables["messages"])
    tables["links"] = _links_table(transport, fabric, simulated_ns)
    tables["links_by_tenant"] = _links_by_tenant_table(tables["messages"], router, fabric)
    tables["nodes"] = _nodes_table(fabric)
    tables["config"] = _config_table(scenario)
    run = Finished(scenario, fabric, transport, simulated_ns, tables)
    for stage in stages:
        tables.update(stage.tables(run))
    bound = throughput_bound(fabric, router.routes, tables["messages"], scenario.duration)
    clock.lap("tables")
    verdicts = judge_all(RunContext(tables=tables))
    metrics = _metrics(tables, bound, scenario, simulated_ns)
    # A crossbar bench's measured saturation throughput; None (no section) on any other
    # fabric, and in a flow-level run, whose flows start on no port's serialiser.
    saturation = (
        None
        if fluid
        else saturation_metrics(
            fabric, tables["messages"], tables["links"], np.asarray(transport.t_left, dtype=float)
        )
    )
    if saturation is not None:
        _merge_metrics(metrics, {"switch": saturation})
    for stage in stages:
        _merge_metrics(metrics, stage.metrics(run))
    clock.lap("judge")
    return RunResult(
        scenario=scenario,
        seed=scenario.seed,
        fabric=fabric,
        tables=tables,
        verdicts=verdicts,
        metrics=metrics,
        simulated_ns=simulated_ns,
        throughput=bound,
        phase_wall_s=clock.laps,
    )

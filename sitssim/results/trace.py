"""Perfetto / Chrome ``trace.json`` of inference runs: what each GPU did, and when.

The file follows the Trace Event Format (the JSON Perfetto and chrome://tracing
open): one process per GPU with three tracks (compute segments, collectives,
pipeline sends), and one ``tokens`` process with a track per request holding
an instant event for every frame the sampler created and every frame the
emitter delivered.

Switch stalls: every credit stall at a switch's output (a ``credits`` row whose link
starts at a switch, as the ``links`` and ``nodes`` tables say) is a slice in a process
per switch (``switch <name>``), on a track per port (``port <peer>``, the peer the output
feeds), named by its VC and flow-control class. A run with such stalls writes the file
even without inference.

Times are microseconds, as the format wants. Everything is built from the run's tables,
so the file is as deterministic as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

TRACKS = {"compute": 0, "all_reduce": 1, "all_gather": 1, "send": 2}
TRACK_NAMES = {0: "compute", 1: "collectives", 2: "pipeline sends"}
NS_PER_US = 1e3


def _stage_gpus(stages: pd.DataFrame) -> dict[tuple[int, str], list[str]]:
    return {(int(r.workload), r.stage): r.gpus.split(",") for r in stages.itertuples(index=False)}


def trace_events(tables: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """Trace events for the inference tables (empty without an inference workload)."""
    spans = tables.get("inference_spans")
    stages = tables.get("inference_stages")
    if spans is None or stages is None or spans.empty:
        return []
    gpus_of = _stage_gpus(stages)
    gpus = sorted({g for names in gpus_of.values() for g in names}, key=_natural)
    pid = {g: i for i, g in enumerate(gpus)}
    events: list[dict[str, Any]] = []
    for gpu, p in pid.items():
        events.append({"ph": "M", "name": "process_name", "pid": p, "args": {"name": gpu}})
        for tid, name in TRACK_NAMES.items():
            events.append(
                {"ph": "M", "name": "thread_name", "pid": p, "tid": tid, "args": {"name": name}}
            )
    for span in spans.itertuples(index=False):
        start = span.t_start_ns / NS_PER_US
        duration = (span.t_end_ns - span.t_start_ns) / NS_PER_US
        for gpu in gpus_of[(int(span.workload), span.stage)]:
            events.append(
                {
                    "ph": "X",
                    "name": span.name,
                    "cat": span.kind,
                    "pid": pid[gpu],
                    "tid": TRACKS[span.kind],
                    "ts": start,
                    "dur": duration,
                    "args": {"workload": int(span.workload), "step": int(span.step)},
                }
            )
    tokens = tables.get("tokens")
    if tokens is not None and not tokens.empty:
        token_pid = len(pid)
        events.append(
            {"ph": "M", "name": "process_name", "pid": token_pid, "args": {"name": "tokens"}}
        )
        for request in sorted(tokens["request"].unique()):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": token_pid,
                    "tid": int(request),
                    "args": {"name": f"request {request}"},
                }
            )
        shown = tokens[tokens["born"] & (tokens["to_stage"] == "emitter")]
        shown = pd.concat([shown, tokens[tokens["to_stage"] == "client"]])
        for row in shown.itertuples(index=False):
            delivered = row.to_stage == "client"
            events.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": f"{'emit' if delivered else 'sample'} token {row.token_id}",
                    "cat": "token",
                    "pid": token_pid,
                    "tid": int(row.request),
                    "ts": (row.t_arrive_ns if delivered else row.t_emit_ns) / NS_PER_US,
                    "args": {
                        "ts_logical": int(row.ts_logical),
                        "latency_hint_ms": int(row.latency_hint),
                    },
                }
            )
    return events


def switch_stall_events(tables: dict[str, pd.DataFrame], first_pid: int) -> list[dict[str, Any]]:
    """Slices of the credit stalls at switch outputs, one process per switch numbered from
    ``first_pid`` in name order, one track per port (empty without such stalls)."""
    stalls = tables.get("credits")
    links = tables.get("links")
    nodes = tables.get("nodes")
    if stalls is None or stalls.empty or links is None or nodes is None:
        return []
    switches = set(nodes.loc[nodes["kind"] == "switch", "node"])
    ends = links.set_index("link_id")[["src", "dst"]]
    src = ends["src"].reindex(stalls["link_id"]).to_numpy()
    dst = ends["dst"].reindex(stalls["link_id"]).to_numpy()
    at_switch = [s in switches for s in src]
    mine = stalls[at_switch]
    if mine.empty:
        return []
    where = list(zip(src[at_switch], dst[at_switch], strict=True))
    pid = {sw: first_pid + k for k, sw in enumerate(sorted({sw for sw, _ in where}, key=_natural))}
    ports = sorted(set(where), key=lambda e: (_natural(e[0]), _natural(e[1])))
    # Tracks are numbered per switch, in port order.
    tid = {port: sum(other[0] == port[0] for other in ports[:k]) for k, port in enumerate(ports)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": p, "args": {"name": f"switch {sw}"}}
        for sw, p in pid.items()
    ]
    for sw, peer in ports:
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid[sw],
                "tid": tid[(sw, peer)],
                "args": {"name": f"port {peer}"},
            }
        )
    for (sw, peer), row in zip(where, mine.itertuples(index=False), strict=True):
        events.append(
            {
                "ph": "X",
                "name": f"credit stall VC{row.vc} {row.fc_class}",
                "cat": "credit_stall",
                "pid": pid[sw],
                "tid": tid[(sw, peer)],
                "ts": row.start_ns / NS_PER_US,
                "dur": (row.end_ns - row.start_ns) / NS_PER_US,
                "args": {
                    "stall_id": int(row.stall_id),
                    "link": row.link,
                    "vc": int(row.vc),
                    "fc_class": row.fc_class,
                    "needed_hdr": int(row.needed_hdr),
                    "needed_data": int(row.needed_data),
                },
            }
        )
    return events


def _natural(name: str) -> tuple[str, int]:
    stem = name.rstrip("0123456789")
    digits = name[len(stem) :]
    return stem, int(digits) if digits else -1


def write_trace(tables: dict[str, pd.DataFrame], path: Path) -> bool:
    """Write ``trace.json`` if the run has inference spans or switch stalls; return whether
    it did."""
    events = trace_events(tables)
    pids = [e["pid"] for e in events]
    events += switch_stall_events(tables, max(pids) + 1 if pids else 0)
    if not events:
        return False
    path.write_text(
        json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}, separators=(",", ":")),
        encoding="utf-8",
    )
    return True

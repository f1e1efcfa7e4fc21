"""The fabric's ECMP groups, and the ``ecmp`` table of what each member carried.

A *group* is a node with several next hops on shortest paths towards some destinations,
together with that set of next hops: the node where an ECMP choice is made (an *ECMP
stage*, ``sitssim.switch.ecmp``). A node whose next hops differ by destination (a leaf
towards the spines for remote GPUs, and towards one GPU for a local one) has one group per
distinct set; destinations with the same set share the group, because the choice there
reads only the flow's hash, the stage's seed and the members' weights, none of which
depend on the destination.

After the run, each delivered message's path (the route id the ECMP ranks name) says which
member it took at every group on its way: a *flow* at a group is one distinct tuple of the
hashed fields, and every message of a flow takes the same member there. The ``ecmp`` table
counts the flows and messages each member took, beside its weight and what the weight was
built from, so that the clause's judge reads the weight formula and the split from one
table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sitssim.fabric.route_tables import RouteTables

if TYPE_CHECKING:
    from sitssim.fabric.routing import Route

ECMP_COLUMNS = (
    "ecmp_id",
    "group",
    "node",
    "member",
    "channel",
    "link",
    "destinations",
    "weight",
    "basis",
    "lldp_ms",
    "lldp_probes",
    "if_speed_bps",
    "flows",
    "messages",
    "share",
    "expected_share",
)


@dataclass(frozen=True)
class EcmpGroup:
    """One group: its node, its members (next hops, sorted) and the destinations it serves."""

    node: str
    members: tuple[str, ...]
    destinations: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.node}>{{{','.join(self.members)}}}"


def ecmp_groups(tables: RouteTables) -> list[EcmpGroup]:
    """Every group of the fabric whose next-hop tables are ``tables``, by node and then
    members, in sorted order."""
    names = tables.names
    found: dict[tuple[int, tuple[int, ...]], list[int]] = defaultdict(list)
    for d in range(len(names)):
        for here, (hops, _counts) in enumerate(tables.table(d)):
            if len(hops) > 1:
                found[(here, hops)].append(d)
    return [
        EcmpGroup(names[here], tuple(names[h] for h in hops), tuple(names[d] for d in dsts))
        for (here, hops), dsts in sorted(found.items())
    ]


def member_counts(
    groups: Sequence[EcmpGroup],
    tables: RouteTables,
    routes: Sequence[Route],
    delivered: Iterable[tuple[int, int]],
    flow_columns: Sequence[Sequence[int]],
) -> tuple[dict[tuple[int, str], int], dict[tuple[int, str], int]]:
    """Flows and messages per (group index, member) over the ``delivered`` messages, each
    (message, route id): a message still in flight has made only some of its choices, so
    its route id names no path it took. ``flow_columns`` are the hashed fields'
    per-message columns."""
    number = tables.number
    index = {(g.node, g.members): i for i, g in enumerate(groups)}
    choices: dict[int, list[tuple[int, str]]] = {}
    flows: dict[tuple[int, str], set[tuple[int, ...]]] = defaultdict(set)
    messages: dict[tuple[int, str], int] = defaultdict(int)
    names = tables.names
    for msg, r in delivered:
        made = choices.get(r)
        if made is None:
            nodes = routes[r].nodes
            towards = tables.table(number[nodes[-1]])
            made = []
            for a, b in pairwise(nodes):
                hops = towards[number[a]][0]
                if len(hops) > 1:
                    made.append((index[(a, tuple(names[h] for h in hops))], b))
            choices[r] = made
        if made:
            key = tuple(column[msg] for column in flow_columns)
            for chosen in made:
                messages[chosen] += 1
                flows[chosen].add(key)
    return {k: len(v) for k, v in flows.items()}, dict(messages)


def ecmp_table(
    groups: Sequence[EcmpGroup],
    channel_index: Mapping[tuple[str, str], int],
    weights: Mapping[tuple[str, str], int],
    lldp: Mapping[tuple[str, str], tuple[float, int]],
    if_speed_bps: Mapping[str, float],
    flows: Mapping[tuple[int, str], int],
    messages: Mapping[tuple[int, str], int],
) -> pd.DataFrame:
    """One row per (group, member): ``weights`` is what the routing used; ``lldp`` the
    (mean ms, probes answered) measured for an implicit member (an explicit one has none);
    ``if_speed_bps`` the negotiated speed by channel name, from the PHY's link records."""
    rows = []
    for i, group in enumerate(groups):
        total_flows = sum(flows.get((i, m), 0) for m in group.members)
        total_weight = sum(weights[(group.node, m)] for m in group.members)
        for m in group.members:
            link = f"{group.node}>{m}"
            measured = lldp.get((group.node, m))
            n_flows = flows.get((i, m), 0)
            rows.append(
                {
                    "group": group.name,
                    "node": group.node,
                    "member": m,
                    "channel": channel_index[(group.node, m)],
                    "link": link,
                    "destinations": len(group.destinations),
                    "weight": weights[(group.node, m)],
                    "basis": "configured" if measured is None else "measured",
                    "lldp_ms": np.nan if measured is None else measured[0],
                    "lldp_probes": 0 if measured is None else measured[1],
                    "if_speed_bps": if_speed_bps.get(link, np.nan),
                    "flows": n_flows,
                    "messages": messages.get((i, m), 0),
                    "share": n_flows / total_flows if total_flows else np.nan,
                    "expected_share": weights[(group.node, m)] / total_weight,
                }
            )
    frame = pd.DataFrame(rows, columns=list(ECMP_COLUMNS[1:]))
    frame.insert(0, "ecmp_id", range(len(frame)))
    return frame.astype(
        {"channel": "int64", "destinations": "int64", "weight": "int64", "lldp_probes": "int64"}
        | {"flows": "int64", "messages": "int64", "if_speed_bps": "float64"}
    )

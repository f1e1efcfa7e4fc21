"""Scenario models of weighted ECMP (``switch.ecmp``) and the switches' vendor profiles
(``switch.vendors``), clause ``switch.ecmp_weight``.

A *vendor profile* is what one vendor's switch implements beyond the data path: how long
its control plane takes to answer an LLDP frame (``lldp_processing``, milliseconds as real
LLDP handling takes, since it runs in software on the switch's CPU), and, as a faulty
device, whether its ECMP hash ignores the group's weights. A switch names its vendor
(``topology.nodes[].vendor`` in a graph, else ``switch.vendor`` for every switch), as an
edge names its link profile. The profile never sets a weight: the weights come from what
the LLDP probes measure (``sitssim.stages.ecmp``).

``switch.ecmp`` turns flow-hashed ECMP on for every node with several shortest-path next
hops. Its ``fields`` are the per-message columns of the transport that a flow hash reads,
plus ``qp``: each (source, destination, tenant) connection spreads its messages round robin
over ``queue_pairs`` queue pairs, as RDMA transports stripe one connection over several
QPs and RoCEv2 carries the QP in the UDP source port that switches hash.

Kept free of ``sitssim.scenario`` imports, because the scenario module imports these.
References to nodes and channels are checked against the built fabric by the stage's
check (``sitssim.stages.ecmp``); vendor names against ``switch.vendors`` by the scenario.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats
from sitssim.quantities import MIN_INTERVAL_NS, Seed, Size, count, time_ns

# A channel by its ends, as the links table names it: ``node>next_hop``.
ChannelName = Annotated[
    str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*>[A-Za-z_][A-Za-z0-9_.\-]*$")
]

# The transport's per-message columns a flow hash may read (``Transport.src`` ...), and the
# queue pair a connection's message goes on. tests/stages/test_ecmp.py holds the first to
# the transport's columns.
TRANSPORT_FIELDS = ("src", "dst", "tenant", "workload", "kind", "vc")
FlowField = Literal["src", "dst", "tenant", "workload", "kind", "vc", "qp"]

# Control-plane delays and probe periods: LLDP transmits every 30 s by default (IEEE
# 802.1AB msgTxInterval) and handles a frame in milliseconds; 10 s bounds both well past
# any device while keeping the probe run's clock far inside float64 nanoseconds.
MAX_CONTROL_NS = 1e10
# An ECMP member weight in 16 bits, as WCMP tables hold them.
MAX_WEIGHT = 2**16 - 1
# Queue pairs per connection: a 16-bit UDP source-port range.
MAX_QUEUE_PAIRS = 2**16
# LLDP probes per member: enough to average, few enough to stay a handful of events.
MAX_PROBES = 64


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VendorProfile(_Strict):
    """One vendor's switch: its LLDP control-plane delay and its ECMP hash's behaviour."""

    lldp_processing: time_ns(0.0, MAX_CONTROL_NS) = 0.0
    hash_ignores_weights: bool = False


class EcmpConfig(_Strict):
    """Flow-hashed weighted ECMP on every equal-cost group of the fabric."""

    fields: Annotated[list[FlowField], Field(min_length=1, max_length=7)] = Field(
        default_factory=lambda: ["src", "dst", "tenant"]
    )
    seed: Seed = 0
    equal_stage_seeds: bool = False
    # "implicit": every member weighed from its negotiated ifSpeed and measured LLDP delay;
    # a map from channel names ("node>next_hop") to weights fixes those members, and the
    # groups it does not name are implicit.
    weights: Literal["implicit"] | dict[ChannelName, count(1, MAX_WEIGHT)] = "implicit"
    queue_pairs: count(1, MAX_QUEUE_PAIRS) = 1
    lldp_probes: count(1, MAX_PROBES) = 4
    lldp_interval: time_ns(MIN_INTERVAL_NS, MAX_CONTROL_NS) = 1e6
    lldp_frame_bytes: Size = 64

    @model_validator(mode="after")
    def _distinct_fields(self) -> EcmpConfig:
        reject_repeats(self.fields, "fields", "flow field")
        if isinstance(self.weights, dict) and not self.weights:
            raise LocatedValueError(
                ("weights",), "give 'implicit' or at least one 'node>next_hop': weight entry"
            )
        return self

"""Scenario files: the versioned YAML schema, loading, and error messages.

A scenario is read in three steps, each of which can reject it with an
``InputError`` naming file, line and field:

1. The file (a regular file of bounded size) is parsed to events, which are
   checked against bounds on depth, length, alias expansion and tags
   (``sitssim.yaml_bounds``), so neither a tag that would build a Python object
   nor a document that would expand without limit gets as far as being built.
2. The round-trip loader gives plain data plus line numbers for every key.
3. Pydantic models (unknown keys forbidden) validate and convert units.

Cross-references that need the built fabric (a workload naming a node that
does not exist) are checked by the builders, which raise ``InputError`` with
the field's location; ``Scenario.locate`` turns that location into a line.

A scenario that *asks* for something the spec forbids (12 GPUs in a fat tree,
a 9-hop chain) is valid input: it runs, and its clause fails.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from sitssim.config.cdc_profile import SynchronizerFlopsFault
from sitssim.config.clock_params import ClockConfig, ClockStepBack, OrderedSetWithoutStamp
from sitssim.config.collective_config import Bandwidth, CollectiveWorkload
from sitssim.config.ecmp_config import EcmpConfig, VendorProfile
from sitssim.config.inference_config import (
    InferenceWorkload,
    PacingIgnoresHintFault,
    RenumberTokensFault,
    SyntheticRequests,
    TraceRequests,
)
from sitssim.config.link_layer import LinkLayer
from sitssim.config.p2p_config import P2pWorkload
from sitssim.config.phy_profile import (
    PHY_FAULT_KINDS,
    ChannelBlock,
    ChannelDrift,
    PhyProfile,
    RetrainAfterWindows,
    RetrainThreshold,
    SkipEqPhase3,
    TrainingPrbs,
    TrainingSymbols,
)
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.config.synthetic_config import ProbeWorkload, SyntheticWorkload
from sitssim.config.tenant_requests_config import TenantRequestsWorkload
from sitssim.config.transaction_config import TransactionWorkload
from sitssim.config.vc_quota_config import QuotaRuntimeUpdateFault, VcQuota
from sitssim.errors import InputError, LocatedValueError, shown
from sitssim.quantities import (
    MAX_FABRIC_LINKS,
    MAX_LANES,
    GpuCount,
    Length,
    Levels,
    Ports,
    PositiveTime,
    Propagation,
    Rate,
    Seed,
    Size,
    Time,
    count,
)
from sitssim.yaml_bounds import line_map, line_of, load_yaml, plain, read_scenario_bytes

SCHEMA_VERSION = 1

NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]


Fidelity = Literal["packet", "flow"]
"""What a run models its messages as: packets over ports and switches, or fluid flows."""
FIDELITIES: tuple[str, ...] = get_args(Fidelity)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- links -------------------------------------------------------------------


class LinkProfile(_Strict):
    """One direction's signalling: rate per lane, lanes, line encoding, flight time."""

    rate: Rate = Field(default=64.0, description="per-lane signalling rate (GT/s)")
    lanes: count(1, MAX_LANES) = 16
    encoding: Literal["flit256", "128b130b", "8b10b", "none"] = "flit256"
    modulation: Literal["pam4", "nrz"] = "pam4"
    propagation: Propagation | None = None
    length: Length | None = None
    channel: ChannelBlock = Field(default_factory=ChannelBlock)

    @model_validator(mode="after")
    def _one_flight_time(self) -> LinkProfile:
        if self.propagation is not None and self.length is not None:
            raise ValueError("give either 'propagation' or 'length', not both")
        return self


# --- topology ----------------------------------------------------------------


class FatTree(_Strict):
    """Switch fat tree: leaf switches of ``radix`` GPU ports, aggregated level by level."""

    kind: Literal["fat_tree"]
    gpus: GpuCount
    levels: Levels = 2
    radix: Ports = 4
    spines: Ports = 1
    link: str = "default"
    root_complex: bool = True

    @model_validator(mode="after")
    def _fits(self) -> FatTree:
        if self.levels == 1 and self.spines != 1:
            raise LocatedValueError(
                ("spines",), "a one-level fat tree has a single switch; 'spines' must be 1"
            )
        capacity = self.radix**self.levels if self.spines == 1 else None
        if capacity is not None and self.gpus > capacity:
            raise LocatedValueError(
                ("gpus",),
                f"{self.gpus} GPUs do not fit a {self.levels}-level tree of radix "
                f"{self.radix} (at most radix**levels = {capacity})",
            )
        if self.spines > 1:
            below = self.gpus
            for _ in range(self.levels - 1):
                below = -(-below // self.radix)
            if below > self.radix:
                raise LocatedValueError(
                    ("gpus",),
                    f"{self.gpus} GPUs need {below} down ports on each spine "
                    f"but the radix is {self.radix}",
                )
        links = self.link_count()
        if links > MAX_FABRIC_LINKS:
            raise LocatedValueError(
                ("spines",) if self.spines > 1 else ("gpus",),
                f"this tree has {links} links; sitssim builds fabrics of at most "
                f"{MAX_FABRIC_LINKS} links",
            )
        return self

    def link_count(self) -> int:
        """Links the builder would make, counted without building (the size bound needs it)."""
        links, below = int(self.root_complex), self.gpus
        for level in range(1, self.levels + 1):
            if level == self.levels and self.spines > 1:
                return links + below * self.spines
            links += below
            below = -(-below // self.radix)
        return links


class DirectRC(_Strict):
    """A root complex with every GPU on its own link; GPU-to-GPU traffic turns at the RC."""

    kind: Literal["direct_rc"]
    gpus: GpuCount
    link: str = "default"


class NVSwitchFabric(_Strict):
    """HGX-style: every GPU has ``links_per_gpu`` links spread over ``planes`` switches."""

    kind: Literal["nvswitch"]
    gpus: GpuCount
    planes: Ports = 4
    links_per_gpu: Ports = 18
    link: str = "default"

    @model_validator(mode="after")
    def _every_plane_reached(self) -> NVSwitchFabric:
        if self.links_per_gpu < self.planes:
            raise LocatedValueError(
                ("links_per_gpu",),
                f"{self.links_per_gpu} links per GPU cannot reach all {self.planes} planes",
            )
        if self.gpus * self.planes > MAX_FABRIC_LINKS:
            raise LocatedValueError(
                ("planes",),
                f"{self.gpus} GPUs on {self.planes} planes make {self.gpus * self.planes} "
                f"GPU-plane links; sitssim builds fabrics of at most {MAX_FABRIC_LINKS}",
            )
        return self


class GraphNode(_Strict):
    id: NodeName
    kind: Literal["gpu", "switch", "root_complex"]
    level: Levels = 1
    # A switch's vendor profile (a key of switch.vendors); none: switch.vendor.
    vendor: NodeName | None = None


class GraphEdge(_Strict):
    a: NodeName
    b: NodeName
    link: str = "default"
    links: Ports = 1


class GraphTopology(_Strict):
    """Explicit nodes and edges, for anything the builders do not cover."""

    kind: Literal["graph"]
    nodes: list[GraphNode] = Field(min_length=1, max_length=MAX_FABRIC_LINKS + 1)
    edges: list[GraphEdge] = Field(default_factory=list, max_length=MAX_FABRIC_LINKS)


class Crossbar(_Strict):
    """A reference bench for switch models: ``ports`` sender GPUs and ``ports`` receiver GPUs,
    each on its own port of one switch, every link of profile ``link``."""

    kind: Literal["crossbar"]
    ports: Ports
    link: str = "default"


Topology = Annotated[
    Union[FatTree, DirectRC, NVSwitchFabric, GraphTopology, Crossbar],  # noqa: UP007
    Field(discriminator="kind"),
]


# --- devices -----------------------------------------------------------------


# An input buffer deeper than this is not a bound any device has; it still holds the whole
# backlog of a saturation bench (tens of thousands of cells per input) many times over.
MAX_INPUT_BUFFER = 2**20
InputBuffer = count(1, MAX_INPUT_BUFFER)


class SwitchParams(_Strict):
    arbitration: Time | list[Time] = Field(
        default=40.0, description="arbitration latency per switch level (one value or per level)"
    )
    vcs_per_port: Ports = 8
    model: Literal["output_queued", "input_queued"] = Field(
        default="output_queued",
        description="switch model: output_queued (an ideal output-queued switch, infinite "
        "speedup: the arbitration latency is its only cost) or input_queued (bounded input "
        "buffers, an allocator and a crossbar of speedup 1)",
    )
    voq: bool = Field(
        default=False,
        description="input_queued: one queue per output at each input (virtual output "
        "queues) instead of one FIFO per input",
    )
    allocator: Literal["round_robin", "islip"] = Field(
        default="round_robin",
        description="input_queued: the crossbar allocator (separable input-first round "
        "robin, or iSLIP)",
    )
    iterations: Ports = Field(default=1, description="input_queued: allocator rounds per matching")
    vc_arbiter: Literal["round_robin", "quota_weighted"] = Field(
        default="round_robin",
        description="input_queued: which of an input's VCs crosses to a granted output: in "
        "turn, or by the slots the input port's quota table gives each VC (needs "
        "switch.vc_quota)",
    )
    input_buffer: InputBuffer = Field(
        default=1024, description="input_queued: messages each input port's buffer holds"
    )
    forwarding: Literal["store_and_forward", "cut_through"] = Field(
        default="store_and_forward",
        description="store_and_forward (a message is forwarded once wholly in) or "
        "cut_through (virtual cut-through: once its first cut_through_bytes are in, if its "
        "output and credit are free; buffered whole only when blocked)",
    )
    cut_through_bytes: Size = Field(
        default=256,
        description="cut_through: how much of a message must have arrived before it may be "
        "forwarded (default one 256 B flit, which must be checked before any of it is)",
    )
    vc_quota: VcQuota | None = Field(
        default=None,
        description="the ports' VC quota tables (tenant -> slots per VC), loaded at link "
        "training; none: no table, and switch.vc_quota is n/a",
    )
    multicast: bool = Field(
        default=False,
        description="capability: the switches send one message out of several outputs "
        "(NVLink SHARP multicast); with 'reduction', NCCL may run NVLS",
    )
    reduction: bool = Field(
        default=False,
        description="capability: the switches combine messages from several inputs into one "
        "(in-switch reduction, NVLS/SHARP); with 'multicast', NCCL may run NVLS",
    )
    reduction_bandwidth: Bandwidth | None = Field(
        default=None,
        description="how fast a switch reduces, in bytes of input per second; none: "
        "unbounded, the links alone limit NVLS",
    )
    vendors: dict[NodeName, VendorProfile] = Field(
        default_factory=dict,
        description="vendor profiles by name: each vendor's LLDP processing delay and ECMP "
        "hash behaviour (sitssim.config.ecmp_config)",
    )
    vendor: NodeName | None = Field(
        default=None, description="the vendor of every switch that names none of its own"
    )
    ecmp: EcmpConfig | None = Field(
        default=None,
        description="flow-hashed weighted ECMP on every equal-cost group; none: the pinned "
        "or sprayed paths of docs/scenario.md Routing, and switch.ecmp_weight is n/a",
    )

    @model_validator(mode="after")
    def _reduction_rate_needs_reduction(self) -> SwitchParams:
        if self.reduction_bandwidth is not None and not self.reduction:
            raise LocatedValueError(
                ("reduction_bandwidth",), "a reduction bandwidth needs 'reduction: true'"
            )
        return self

    def capabilities(self) -> SwitchCapabilities:
        """What the switches can do beyond forwarding: the value a collectives section
        carries, so the collectives code reads it without the scenario."""
        return SwitchCapabilities(
            multicast=self.multicast,
            reduction=self.reduction,
            reduction_bytes_per_ns=(
                math.inf if self.reduction_bandwidth is None else self.reduction_bandwidth
            ),
        )

    def arbitration_ns(self, level: int) -> float:
        """Arbitration latency of a switch at ``level`` (1 = leaf)."""
        if isinstance(self.arbitration, list):
            return self.arbitration[min(level, len(self.arbitration)) - 1]
        return self.arbitration


class RootComplexParams(_Strict):
    arbitration: Time = 20.0
    tso_window: PositiveTime | None = None


class Tenant(_Strict):
    name: NodeName


MAX_TENANTS = 1024
"""The most tenants a count (``tenants: N``) may name: beyond any port's 64 quota slots."""


# --- workloads ---------------------------------------------------------------
# Each kind's model is a config leaf (``sitssim.config.*_config``).

Workload = Annotated[
    Union[  # noqa: UP007
        SyntheticWorkload,
        ProbeWorkload,
        CollectiveWorkload,
        P2pWorkload,
        InferenceWorkload,
        TransactionWorkload,
        TenantRequestsWorkload,
    ],
    Field(discriminator="kind"),
]


# --- faults: one device deviating from the spec the way buggy silicon would --

Fault = Annotated[
    Union[  # noqa: UP007
        ClockStepBack,
        OrderedSetWithoutStamp,
        RenumberTokensFault,
        PacingIgnoresHintFault,
        SkipEqPhase3,
        RetrainAfterWindows,
        RetrainThreshold,
        TrainingPrbs,
        TrainingSymbols,
        SynchronizerFlopsFault,
        QuotaRuntimeUpdateFault,
    ],
    Field(discriminator="kind"),
]


# --- the scenario ------------------------------------------------------------


@dataclass(frozen=True)
class SourceInfo:
    """Where a scenario came from, for error messages and the report."""

    path: str
    sha256: str
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, loc: Iterable[Any]) -> int | None:
        """Line of the deepest known prefix of ``loc`` (1-based)."""
        return line_of(self.lines, tuple(loc))


class Scenario(_Strict):
    version: Literal[1] = SCHEMA_VERSION
    name: NodeName
    description: str = ""
    seed: Seed = 0
    duration: PositiveTime
    fidelity: Fidelity = Field(
        default="packet",
        description="packet: every message over ports, switches and links as they work; "
        "flow: each route's messages a connection served in order, the connections max-min "
        "fair fluid flows (approximate; the clauses that need packet-level facts are n/a)",
    )
    topology: Topology
    links: dict[NodeName, LinkProfile] = Field(default_factory=lambda: {"default": LinkProfile()})
    switch: SwitchParams = Field(default_factory=SwitchParams)
    root_complex: RootComplexParams = Field(default_factory=RootComplexParams)
    tenants: list[Tenant] = Field(default_factory=lambda: [Tenant(name="default")], min_length=1)
    workloads: list[Workload] = Field(default_factory=list)
    clocks: ClockConfig = Field(default_factory=ClockConfig.disabled)
    faults: list[Fault] = Field(default_factory=list)
    phy: PhyProfile = Field(default_factory=PhyProfile)
    drift: list[ChannelDrift] = Field(default_factory=list)
    link_layer: LinkLayer = Field(default_factory=LinkLayer)

    _source: SourceInfo | None = PrivateAttr(default=None)

    @field_validator("tenants", mode="before")
    @classmethod
    def _tenant_count(cls, value: object) -> object:
        """``tenants: N`` is N tenants named t0 .. t(N-1), so that a study can vary how many
        there are."""
        if isinstance(value, bool) or not isinstance(value, int):
            return value
        if not 1 <= value <= MAX_TENANTS:
            raise ValueError(
                f"expected a tenant count from 1 to {MAX_TENANTS}, or a list of tenants"
            )
        return [{"name": f"t{k}"} for k in range(value)]

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        profiles = set(self.links)
        topo = self.topology
        if isinstance(topo, GraphTopology):
            for i, edge in enumerate(topo.edges):
                if edge.link not in profiles:
                    raise LocatedValueError(
                        ("topology", "edges", i, "link"),
                        f"unknown link profile {edge.link!r}; defined: {sorted(profiles)}",
                    )
        elif topo.link not in profiles:
            raise LocatedValueError(
                ("topology", "link"),
                f"unknown link profile {topo.link!r}; defined: {sorted(profiles)}",
            )
        if self.switch.vc_arbiter == "quota_weighted" and (
            self.switch.model != "input_queued" or self.switch.vc_quota is None
        ):
            raise LocatedValueError(
                ("switch", "vc_arbiter"),
                "quota_weighted VC arbitration needs switch.model: input_queued and a "
                "switch.vc_quota table",
            )
        tenants = [t.name for t in self.tenants]
        if len(set(tenants)) != len(tenants):
            raise LocatedValueError(("tenants",), "tenant names must be unique")
        for i, wl in enumerate(self.workloads):
            if isinstance(wl, TenantRequestsWorkload):
                for k, name in enumerate(wl.tenants or ()):
                    if name not in tenants:
                        raise LocatedValueError(
                            ("workloads", i, "tenants", k),
                            f"unknown tenant {name!r}; defined: {tenants}",
                        )
            elif wl.tenant is not None and wl.tenant not in tenants:
                raise LocatedValueError(
                    ("workloads", i, "tenant"), f"unknown tenant {wl.tenant!r}; defined: {tenants}"
                )
            if wl.name is not None and any(o.name == wl.name for o in self.workloads[:i]):
                raise LocatedValueError(
                    ("workloads", i, "name"), f"workload name {wl.name!r} is used twice"
                )
            if isinstance(wl, SyntheticWorkload) and wl.stop is None and wl.start >= self.duration:
                raise LocatedValueError(
                    ("workloads", i, "start"),
                    "'start' must come before 'duration' (or give a later 'stop')",
                )
        if isinstance(self.switch.arbitration, list) and not self.switch.arbitration:
            raise LocatedValueError(("switch", "arbitration"), "give at least one latency")
        self._vendor_references()
        return self

    def _vendor_references(self) -> None:
        """Every vendor a switch names is a profile of ``switch.vendors``; only switches
        name one (a vendor profile is a switch's control plane and hash)."""
        vendors = sorted(self.switch.vendors)
        named: list[tuple[tuple, str]] = []
        if self.switch.vendor is not None:
            named.append((("switch", "vendor"), self.switch.vendor))
        if isinstance(self.topology, GraphTopology):
            for i, node in enumerate(self.topology.nodes):
                if node.vendor is None:
                    continue
                if node.kind != "switch":
                    raise LocatedValueError(
                        ("topology", "nodes", i, "vendor"),
                        f"only a switch has a vendor profile; {node.id} is a {node.kind}",
                    )
                named.append((("topology", "nodes", i, "vendor"), node.vendor))
        for loc, vendor in named:
            if vendor not in self.switch.vendors:
                raise LocatedValueError(
                    loc, f"unknown vendor {vendor!r}; switch.vendors defines: {vendors}"
                )

    @property
    def source(self) -> SourceInfo:
        return self._source or SourceInfo(path="<memory>", sha256="")

    def updated(self, **fields: Any) -> Scenario:
        """A copy with ``fields`` replaced that still knows the file it came from."""
        copy = self.model_copy(update=fields)
        copy._source = self._source
        return copy

    def error(self, loc: tuple, message: str) -> InputError:
        """An ``InputError`` at scenario location ``loc`` (a path of keys and indices)."""
        return InputError(
            message=message,
            file=self.source.path,
            line=self.source.line_of(loc),
            field=_dotted(loc),
        )


# --- loading -----------------------------------------------------------------


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*", re.ASCII)


def _dotted(loc: Iterable[Any]) -> str:
    """``workloads[0].load``; a key that is not a plain name is quoted (``links[' ']``),
    so a blank or odd key still shows in the message."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(str(part)):
            out += f"[{shown(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_KIND_MODELS: dict[str, type[BaseModel]] = {
    "fat_tree": FatTree,
    "direct_rc": DirectRC,
    "nvswitch": NVSwitchFabric,
    "graph": GraphTopology,
    "crossbar": Crossbar,
    "synthetic": SyntheticWorkload,
    "probes": ProbeWorkload,
    "clock_step_back": ClockStepBack,
    "ordered_set_without_stamp": OrderedSetWithoutStamp,
    "collective": CollectiveWorkload,
    "p2p": P2pWorkload,
    "inference": InferenceWorkload,
    "transactions": TransactionWorkload,
    "tenant_requests": TenantRequestsWorkload,
    "generator": SyntheticRequests,
    "trace": TraceRequests,
    "renumber_tokens": RenumberTokensFault,
    "pacing_ignores_hint": PacingIgnoresHintFault,
    **PHY_FAULT_KINDS,
    "synchronizer_flops": SynchronizerFlopsFault,
    "quota_runtime_update": QuotaRuntimeUpdateFault,
}


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated`` and ``Optional``: ``Annotated[Model | None, ...]`` -> ``Model``."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) in (Union, UnionType) and type(None) in get_args(annotation):
            rest = [a for a in get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation
            annotation = rest[0]
        else:
            return annotation


def _annotation_at(loc: tuple) -> Any:
    """The type pydantic validated at its raw error location ``loc``, or None."""
    current: Any = Scenario
    for part in loc:
        current = _unwrap(current)
        origin = get_origin(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            current = info.annotation
        elif origin is list:
            current = get_args(current)[0]
        elif origin is dict:
            current = get_args(current)[1]
        elif origin in (Union, UnionType) and part in _KIND_MODELS:
            current = _KIND_MODELS[part]
        else:
            return None
    return _unwrap(current)


def _kinds_at(loc: tuple) -> str:
    union = _annotation_at(loc)
    members = [m for m in get_args(union) if isinstance(m, type) and issubclass(m, BaseModel)]
    return ", ".join(get_args(m.model_fields["kind"].annotation)[0] for m in members)


def _data_loc(loc: tuple, data: Any, missing: bool) -> tuple[tuple, tuple | None]:
    """``loc`` reduced to steps that exist in the data, and where a union first branched.

    Pydantic's locations include internal steps (``fat_tree``, ``function-after[...]``,
    ``[key]``) that mean nothing to the user. A missing field is the one step kept
    although the data lacks it. The branch point groups the errors of one smart union.
    """
    out: list = []
    branch: tuple | None = None
    node = data
    for i, part in enumerate(loc):
        in_map = isinstance(node, dict) and isinstance(part, str) and part in node
        in_seq = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_map or in_seq:
            node = node[part]
            out.append(part)
        elif missing and i == len(loc) - 1:
            out.append(part)
        elif branch is None and part not in _KIND_MODELS:
            branch = tuple(out)
    return tuple(out), branch


_NAME_RULE = "a name of letters, digits, '_', '.' or '-' that starts with a letter or '_'"


def _expected(err: dict) -> str:
    """What pydantic's check wanted, in the scenario's terms."""
    kind, ctx, loc = err["type"], err.get("ctx", {}), tuple(err["loc"])
    if kind == "literal_error" and loc == ("version",):
        return f"a schema version this sitssim reads ({SCHEMA_VERSION})"
    bound = ctx.get("gt", ctx.get("ge", ctx.get("le", ctx.get("lt"))))
    simple = {
        "int_type": "a whole number",
        "int_parsing": "a whole number",
        "int_from_float": "a whole number",
        "float_type": "a number",
        "float_parsing": "a number",
        "finite_number": "a finite number",
        "bool_type": "true or false",
        "bool_parsing": "true or false",
        "string_type": "text",
        "list_type": "a list",
        "dict_type": "a mapping",
        "model_type": "a mapping of fields",
        "model_attributes_type": "a mapping of fields",
        "literal_error": f"one of {ctx.get('expected')}",
        "greater_than": "a positive value" if bound == 0 else f"a value greater than {bound}",
        "greater_than_equal": "a value of 0 or more" if bound == 0 else f"at least {bound}",
        "less_than": f"a value below {bound}",
        "less_than_equal": f"at most {bound}",
        "string_pattern_mismatch": _NAME_RULE,
        "string_too_short": "a non-empty string",
        "too_short": f"at least {ctx.get('min_length')} item(s)",
    }
    return simple.get(kind, err["msg"])


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return shown(value)


def _message(err: dict) -> str:
    kind, loc = err["type"], tuple(err["loc"])
    if kind == "extra_forbidden":
        annotation = _annotation_at(loc[:-1])
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "unknown key"
        valid = list(annotation.model_fields)
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown key{hint} (valid keys: {', '.join(valid)})"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        got = err["input"].get("kind")
        return f"unknown kind {shown(got)}; expected one of: {_kinds_at(loc)}"
    if kind == "union_tag_not_found":
        return f"required field is missing; expected one of: {_kinds_at(loc)}"
    if kind == "value_error":
        # Our own validators (units, cross-field rules) already say what they expected.
        return err["msg"].removeprefix("Value error, ")
    return f"expected {_expected(err)}, got {_shown(err['input'])}"


def _first_problem(errors: list[dict], data: Any, source: SourceInfo) -> tuple[tuple, str]:
    """The one error to report: its data location and message.

    An unknown key comes first (a misspelt key also makes its field "missing");
    otherwise the earliest line. Of one smart union's branches, the branch that got
    deepest into the input is the one the user meant (``[40ns, 5]`` is a list).
    """
    found = []
    for order, err in enumerate(errors):
        raw = tuple(err["loc"])
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            raw += ("kind",)
        missing = err["type"] in ("missing", "union_tag_not_found")
        loc, branch = _data_loc(raw, data, missing=missing)
        located = err.get("ctx", {}).get("error")
        if isinstance(located, LocatedValueError):
            loc, message = loc + located.loc, located.message
        else:
            message = _message(err)
        found.append((loc, branch, message, order, err["type"] == "extra_forbidden"))
    deepest: dict[tuple, int] = {}
    for loc, branch, *_ in found:
        if branch is not None:
            deepest[branch] = max(deepest.get(branch, 0), len(loc))
    kept = [f for f in found if f[1] is None or len(f[0]) == deepest[f[1]]]
    never = float("inf")
    loc, _, message, _, _ = min(kept, key=lambda f: (not f[4], source.line_of(f[0]) or never, f[3]))
    return loc, message


def scenario_from_data(
    data: Any, path: str = "<memory>", lines: dict | None = None, sha256: str = ""
) -> Scenario:
    """Validate already-parsed data; raise ``InputError`` on the first problem."""
    source = SourceInfo(path=path, sha256=sha256, lines=lines or {})
    if not isinstance(data, dict):
        if data is None:
            got = "nothing"
        elif isinstance(data, list):
            got = "a YAML list"
        else:
            got = f"a YAML scalar ({shown(data)})"
        raise InputError(
            f"expected a mapping of scenario fields at the top level, got {got}",
            file=path,
            line=source.lines.get((), 1) if data is not None else None,
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        loc, message = _first_problem(exc.errors(include_url=False), data, source)
        # A field missing from the top level has no line of its own: name the mapping's.
        line = source.line_of(loc) or source.lines.get(())
        raise InputError(message, file=path, line=line, field=_dotted(loc) or None) from None
    scenario._source = source
    return scenario


Edit = Callable[[Any], None]


def load_scenario(path: str | Path, edit: Edit | None = None) -> Scenario:
    """Read, check and validate a scenario file.

    ``edit``, if given, changes the file's parsed data in place before it is validated:
    a study's variant of a scenario is checked as strictly as the file, its errors still
    name the file (the lines are the base's), and its hash covers the edit too.
    """
    return scenario_variants(path)(edit)


def scenario_variants(path: str | Path) -> Callable[[Edit | None], Scenario]:
    """Read and parse a scenario file once; each call validates its data, ``edit``-ed on a
    fresh copy, as ``load_scenario(path, edit)`` would (a study's many variants pay for
    one parse)."""
    name = str(path)
    raw = read_scenario_bytes(name)
    data = load_yaml(raw, name)
    if data is None:
        raise InputError(
            "empty file (nothing but whitespace or comments): "
            "expected a YAML mapping of scenario fields",
            file=name,
        )
    lines = line_map(data)
    parsed = plain(data)

    def variant(edit: Edit | None) -> Scenario:
        digest = hashlib.sha256(raw)
        data = parsed
        if edit is not None:
            data = copy.deepcopy(parsed)
            edit(data)
            digest.update(json.dumps(data, sort_keys=True, default=str).encode())
        return scenario_from_data(data, path=name, lines=lines, sha256=digest.hexdigest())

    return variant

"""NCCL's cost model: the time an NCCL release expects a collective to take, and its choice.

Theory of operation
-------------------
NCCL picks an algorithm and a protocol for each call by the smallest modelled time, a
latency plus bytes over a bandwidth (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in
``src/graph/tuning.cc`` at commit b6475625, NCCL 2.20.3; ``docs/ccl_sources.md`` §1). The
latency is a base per (algorithm, protocol), ``baseLat``, plus a per-step hardware latency
per link type, ``hwLat``, times the steps the algorithm takes: a ring all-reduce 2(n - 1),
a ring all-gather or reduce-scatter n - 1, a tree twice its depth in ranks; NVLS pays the
hardware latency alone, in place of the base. The bandwidth starts from the topology
search's result, channels times the bandwidth per channel (``SearchResult``), is cut by a
factor per protocol and capped per GPU generation, and is turned from bus bandwidth into
algorithm bandwidth (a ring all-reduce moves 2(n - 1)/n of the buffer per rank). The pair
with the least ``latency + bytes / bandwidth`` wins. One node only: several nodes add
network terms not modelled here, and the tree is the balanced one NCCL builds on one node.

The model changed between releases; a ``CostModel`` holds what differs, and a scenario names
the release its GPUs run (``COST_MODELS``):

* ``NCCL_2_20``: NCCL 2.20.3's ``tuning.cc`` (commit b6475625).
* ``NCCL_2_29``: the tables NCCL 2.29.2 prints at start-up (``NCCL_DEBUG_SUBSYS=TUNING``) for
  2, 4 and 6 H100s of one NVSwitch board (waynehacking8/nccl-collectives-bench,
  ``results/scaling_attributed/g{2,4,6}_auto.log`` at ec97f062), whose every AllReduce entry
  these constants reproduce: NVIDIA/nccl ``src/tuning/cost_model.cc``, ``ring.cc`` and
  ``nvls.cc`` at commit 1fc949c5, the same as 2.28.3's source. Against 2.20.3: ring LL keeps
  half the bus bandwidth instead of a quarter, Hopper's ``llMaxBw`` is 141 GB/s, NVLS's NVLink
  latency 25 µs, a tree's Simple step 4 µs over a base of 8.4, and NVLS's bandwidth is
  ``nvlsEfficiency`` (0.85 on Hopper) of the search's, doubled for an all-reduce and capped
  at the search's bandwidth between the GPU and the switch (``docs/ccl_sources.md`` §1.11).
  NCCL 2.24 to 2.26 kept 2.20's NVLS rule (5/6 of the bus bandwidth): on 8 GPUs 267 GB/s
  against 272, which moves no choice.

These are NCCL's own estimates, the inputs of its choice, not measurements: nothing here is
a reference for the model's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sitssim.ccl.protocols import PROTOCOLS

Key = tuple[str, str]

PROTOCOL_NAMES = tuple(PROTOCOLS)
"""NCCL's protocol order, the columns of its tables."""


def _table(rows: dict[str, tuple[float, float, float]]) -> MappingProxyType[tuple[str, str], float]:
    return MappingProxyType(
        {(a, p): v for a, row in rows.items() for p, v in zip(PROTOCOL_NAMES, row, strict=True)}
    )


BASE_LATENCY_US = _table(
    {
        "tree": (6.8, 14.0, 0.0),
        "ring": (6.6, 14.0, 8.4),
        "collnet_direct": (0.0, 0.0, 0.0),
        "collnet_chain": (0.0, 0.0, 0.0),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
    }
)
"""``baseLat[algorithm][protocol]`` (µs), NCCL 2.20.3 tuning.cc."""

HW_LATENCY_US = MappingProxyType(
    {
        "nvlink": _table(
            {
                "tree": (0.6, 1.25, 28.0),
                "ring": (0.6, 1.9, 3.4),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 23.0),
                "nvls_tree": (0.0, 0.0, 23.0),
            }
        ),
        "pci": _table(
            {
                "tree": (1.0, 1.9, 28.0),
                "ring": (1.0, 2.5, 5.7),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 0.0),
                "nvls_tree": (0.0, 0.0, 0.0),
            }
        ),
        "net": _table(
            {
                "tree": (5.0, 8.5, 28.0),
                "ring": (2.7, 4.0, 14.0),
                "collnet_direct": (0.0, 0.0, 31.0),
                "collnet_chain": (0.0, 0.0, 30.0),
                "nvls": (0.0, 0.0, 18.0),
                "nvls_tree": (0.0, 0.0, 14.0),
            }
        ),
    }
)
"""``hwLat[hardware][algorithm][protocol]`` (µs per step), NCCL 2.20.3 tuning.cc."""

BASE_LATENCY_2_29_US = _table(
    {
        "tree": (6.8, 14.0, 8.4),
        "ring": (6.6, 14.0, 8.4),
        "collnet_direct": (0.0, 0.0, 0.0),
        "collnet_chain": (0.0, 0.0, 0.0),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
    }
)
"""``baseLatencies`` (µs), NVIDIA/nccl ``src/tuning/cost_model.cc`` at 1fc949c5."""

HW_LATENCY_2_29_US = MappingProxyType(
    {
        "nvlink": _table(
            {
                "tree": (0.6, 1.25, 4.0),
                "ring": (0.6, 1.9, 3.4),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 25.0),
                "nvls_tree": (0.0, 0.0, 25.0),
            }
        ),
        "pci": _table(
            {
                "tree": (1.0, 1.9, 4.0),
                "ring": (1.0, 2.5, 5.7),
                "collnet_direct": (0.0, 0.0, 3.7),
                "collnet_chain": (0.0, 0.0, 2.8),
                "nvls": (0.0, 0.0, 0.0),
                "nvls_tree": (0.0, 0.0, 0.0),
            }
        ),
        "net": _table(
            {
                "tree": (5.0, 8.5, 14.0),
                "ring": (2.7, 4.0, 14.0),
                "collnet_direct": (0.0, 0.0, 31.0),
                "collnet_chain": (0.0, 0.0, 30.0),
                "nvls": (0.0, 0.0, 18.0),
                "nvls_tree": (0.0, 0.0, 20.9),
            }
        ),
    }
)
"""``hwLatencies`` (µs per step), NVIDIA/nccl ``src/tuning/cost_model.cc`` at 1fc949c5."""


def ring_steps(operation: str, n_ranks: int) -> int:
    """Steps of a ring (``nsteps`` in ``ncclTopoTuneModel``)."""
    if n_ranks < 1:
        raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
    if operation == "all_reduce":
        return 2 * (n_ranks - 1)
    if operation in ("all_gather", "reduce_scatter"):
        return n_ranks - 1
    if operation in ("broadcast", "reduce"):
        return n_ranks
    raise ValueError(f"unknown operation {operation!r}")


GENERATIONS = ("volta", "ampere", "hopper")


def generation_of(compute_capability: float) -> str:
    """The generation NCCL picks its tables by: Volta from 7.0, Ampere from 8.0, Hopper from 9.0
    (``minCompCap`` in ``ncclTopoTuneModel``); later GPUs take Hopper's, the newest modelled."""
    if compute_capability >= 9.0:
        return "hopper"
    if compute_capability >= 8.0:
        return "ampere"
    if compute_capability >= 7.0:
        return "volta"
    raise ValueError(f"NCCL's tables start at compute capability 7.0, got {compute_capability}")


LL_MAX_GBPS = MappingProxyType({"volta": 39.0, "ampere": 87.7, "hopper": 87.7})
"""``llMaxBws`` on one node (GB/s), NCCL 2.20.3 tuning.cc."""
LL_MAX_2_29_GBPS = MappingProxyType({"volta": 39.0, "ampere": 87.7, "hopper": 141.0})
"""``llMaxBws`` on one node (GB/s), NVIDIA/nccl ``src/tuning/cost_model.cc`` at 1fc949c5."""
RING_LL128_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 36.7})
"""``perChMaxRingLL128Bws`` on one node (GB/s per channel)."""
TREE_LL128_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 36.7})
"""``perChMaxTreeLL128Bws`` on one node (GB/s per channel)."""
TREE_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 26.5, "ampere": 24.0, "hopper": 38.7})
"""``perChMaxTreeBws`` on one node (GB/s per channel)."""

# Bus bandwidth factors per protocol on one node (ncclTopoTuneModel): LL carries half its
# lines' bytes and pays flag polling, LL128 120 of 128 bytes less its own overheads.
LL128_FACTOR = 0.92
TREE_FACTOR = 0.92
TREE_LL_FACTOR = 1 / 3.8
TREE_LL128_FACTOR = 7 / 9
NVLS_ALGORITHM_FACTOR = 5 / 6
"""2.20.3's NVLS bus-to-algorithm bandwidth factor."""
NVLS_EFFICIENCY_2_29 = MappingProxyType({"volta": 0.0, "ampere": 0.0, "hopper": 0.85})
"""``nvlsEfficiency`` per generation, NVIDIA/nccl ``src/tuning/nvls.cc`` at 1fc949c5."""
TREE_ALGORITHM_FACTOR = 0.5

# One row per protocol, one entry per power of two from 64 B: kept as NCCL lays it out.
# fmt: off
TREE_CORRECTION = MappingProxyType(
    {
        "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
               1.0, 1.0, 1.0, 1.0),
        "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
                  .9, .9, .9, 1.0, 1.0),
        "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
                   .7, .8, .9, .9),
    }
)
# fmt: on
"""``treeCorrectionFactor[protocol]``, NCCL 2.20.3 tuning.cc: the tree's bandwidth is scaled
by the entry of floor(log2(bytes / 64)) (0 below 128 bytes), for 64 B to 512 MiB; NCCL's
comment says trees do not follow the model for medium sizes."""


def tree_correction(protocol: str, n_bytes: int) -> float:
    """The factor ``ncclTopoGetAlgoTime`` applies to a tree's bandwidth for ``n_bytes``."""
    factors = TREE_CORRECTION[protocol]
    index = max(0, (n_bytes >> 6).bit_length() - 1)
    return factors[index] if index < len(factors) else 1.0


@dataclass(frozen=True)
class SearchResult:
    """What NCCL's topology search found for one algorithm: channels, GB/s per channel within
    the node (``bwIntra``) and, where the algorithm has one, to what lies beyond the GPUs
    (``bwInter``: for NVLS, the switch)."""

    channels: int
    per_channel_GBps: float
    inter_GBps: float | None = None


@dataclass(frozen=True)
class CostModel:
    """What one NCCL release's cost model holds that another's does not (module docstring)."""

    release: str
    base_latency_us: Mapping[Key, float]
    hw_latency_us: Mapping[str, Mapping[Key, float]]
    ll_max_GBps: Mapping[str, float]
    ring_ll_reducing_factor: float
    """Ring LL's share of the bus bandwidth for all-reduce and reduce."""
    ring_ll_factor: float
    """Ring LL's share for the other operations."""
    nvls_efficiency: Mapping[str, float] | None
    """``nvlsEfficiency`` per generation; None for 2.20's rule (5/6 of the bus bandwidth)."""


NCCL_2_20 = CostModel(
    release="2.20.3",
    base_latency_us=BASE_LATENCY_US,
    hw_latency_us=HW_LATENCY_US,
    ll_max_GBps=LL_MAX_GBPS,
    ring_ll_reducing_factor=1 / 4,
    ring_ll_factor=1 / 3,
    nvls_efficiency=None,
)
NCCL_2_29 = CostModel(
    release="2.29.2",
    base_latency_us=BASE_LATENCY_2_29_US,
    hw_latency_us=HW_LATENCY_2_29_US,
    ll_max_GBps=LL_MAX_2_29_GBPS,
    ring_ll_reducing_factor=0.5,
    ring_ll_factor=0.5,
    nvls_efficiency=NVLS_EFFICIENCY_2_29,
)
COST_MODELS: MappingProxyType[str, CostModel] = MappingProxyType(
    {"2.20": NCCL_2_20, "2.29": NCCL_2_29}
)
"""The releases by the names a scenario gives them (``nccl``)."""


def latency_us(
    model: CostModel, algorithm: str, protocol: str, operation: str, n_ranks: int, hw: str
) -> float:
    """``model``'s latency of one call on one node whose GPUs are joined by ``hw``.

    A ring pays its base plus one hardware latency per step; a tree (all-reduce only) twice
    its depth of n - 1 ranks below the root on one node; NVLS its hardware latency alone.
    """
    if (algorithm, protocol) not in model.base_latency_us or hw not in model.hw_latency_us:
        raise ValueError(f"no latency for {algorithm!r} / {protocol!r} on {hw!r}")
    step = model.hw_latency_us[hw][(algorithm, protocol)]
    base = model.base_latency_us[(algorithm, protocol)]
    if algorithm == "ring":
        if operation in ("broadcast", "reduce"):
            # One step's latency when every channel is alike, as on one NVSwitch node.
            return base + step
        return base + ring_steps(operation, n_ranks) * step
    if algorithm == "tree":
        if operation != "all_reduce":
            raise ValueError(f"NCCL models the tree for all_reduce only, not {operation!r}")
        return base + 2 * (n_ranks - 1) * step
    if algorithm in ("nvls", "nvls_tree"):
        if protocol != "simple":
            raise ValueError(f"NCCL models {algorithm} with simple only, not {protocol!r}")
        return step
    raise ValueError(f"{algorithm!r} is not modelled on one node")


def bus_bandwidth_GBps(
    model: CostModel,
    algorithm: str,
    protocol: str,
    operation: str,
    search: SearchResult,
    generation: str,
) -> float:
    """``model``'s bus bandwidth for (algorithm, protocol) on one node."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation must be one of {GENERATIONS}, got {generation!r}")
    bw = search.channels * search.per_channel_GBps
    ch = search.channels
    ll_max = model.ll_max_GBps[generation]
    if algorithm == "ring":
        if protocol == "ll":
            reducing = operation in ("all_reduce", "reduce")
            factor = model.ring_ll_reducing_factor if reducing else model.ring_ll_factor
            return min(bw * factor, ll_max)
        if protocol == "ll128":
            return min(bw * LL128_FACTOR, ch * RING_LL128_MAX_PER_CHANNEL_GBPS[generation])
        return bw
    if algorithm == "tree":
        bw = min(bw * TREE_FACTOR, ch * TREE_MAX_PER_CHANNEL_GBPS[generation])
        if protocol == "ll":
            return min(bw * TREE_LL_FACTOR, ll_max)
        if protocol == "ll128":
            return min(bw * TREE_LL128_FACTOR, ch * TREE_LL128_MAX_PER_CHANNEL_GBPS[generation])
        return bw
    if algorithm == "nvls" and protocol == "simple":
        if model.nvls_efficiency is None:
            return bw
        # Each channel's share of the switch's efficiency, less a channel's worth; an
        # all-reduce counts its reduction and its multicast, the others the peers' share.
        per_channel = search.per_channel_GBps * model.nvls_efficiency[generation] * (ch - 1) / ch
        per_channel *= 2 if operation == "all_reduce" else (ch - 1) / ch
        inter = search.inter_GBps if search.inter_GBps is not None else math.inf
        return min(per_channel, inter) * ch
    raise ValueError(f"no bandwidth for {algorithm!r} / {protocol!r} on one node")


def algorithm_bandwidth_GBps(
    model: CostModel,
    algorithm: str,
    protocol: str,
    operation: str,
    n_ranks: int,
    search: SearchResult,
    generation: str,
) -> float:
    """Bytes of the user's buffer per second: bus bandwidth over what each rank moves."""
    bus = bus_bandwidth_GBps(model, algorithm, protocol, operation, search, generation)
    if algorithm == "ring":
        return bus * n_ranks / ring_steps(operation, n_ranks)
    if algorithm == "nvls":
        if model.nvls_efficiency is None:
            return bus * NVLS_ALGORITHM_FACTOR
        return bus * n_ranks / ring_steps(operation, n_ranks)
    return bus * TREE_ALGORITHM_FACTOR


def time_us(
    model: CostModel,
    algorithm: str,
    protocol: str,
    operation: str,
    n_bytes: int,
    n_ranks: int,
    search: SearchResult,
    generation: str,
    hw: str = "nvlink",
) -> float:
    """``ncclTopoGetAlgoTime`` for one call on one node: latency plus bytes over bandwidth
    (1 GB/s is 1000 bytes per µs), a tree's bandwidth corrected by ``tree_correction``."""
    bw = algorithm_bandwidth_GBps(
        model, algorithm, protocol, operation, n_ranks, search, generation
    )
    if algorithm == "tree":
        bw *= tree_correction(protocol, n_bytes)
    latency = latency_us(model, algorithm, protocol, operation, n_ranks, hw)
    return latency + n_bytes / (1000.0 * bw)


def candidates(operation: str, n_ranks: int, generation: str, nvswitch: bool) -> list[Key]:
    """The (algorithm, protocol) pairs NCCL considers on one node, in its scan order: the tree
    for all-reduce; ring always; NVLS (Simple only) for all-reduce on Hopper behind an NVSwitch
    with more than two GPUs (2.20.3's ``ncclNvlsInit``; 2.29.2 rates NVLS on two GPUs too, at
    a bandwidth that never wins). LL128 is on by default on the generations listed here."""
    pairs: list[Key] = []
    if operation == "all_reduce":
        pairs += [("tree", p) for p in PROTOCOL_NAMES]
    pairs += [("ring", p) for p in PROTOCOL_NAMES]
    if operation == "all_reduce" and generation == "hopper" and nvswitch and n_ranks > 2:
        pairs.append(("nvls", "simple"))
    return pairs


def choose(
    model: CostModel,
    operation: str,
    n_bytes: int,
    n_ranks: int,
    searches: dict[str, SearchResult],
    generation: str,
    nvswitch: bool,
    hw: str = "nvlink",
    allowed: Callable[[Key], bool] | None = None,
) -> Key:
    """``model``'s choice: the candidate pair with the least modelled time (the first listed
    on a tie, as NCCL scans algorithms then protocols). ``searches`` by algorithm; an
    algorithm without one is not a candidate, nor a pair ``allowed`` refuses (as NCCL_ALGO
    and NCCL_PROTO narrow the choice)."""
    best: Key | None = None
    best_t = math.inf
    for algorithm, protocol in candidates(operation, n_ranks, generation, nvswitch):
        if algorithm not in searches or (
            allowed is not None and not allowed((algorithm, protocol))
        ):
            continue
        t = time_us(
            model,
            algorithm,
            protocol,
            operation,
            n_bytes,
            n_ranks,
            searches[algorithm],
            generation,
            hw,
        )
        if t < best_t:
            best, best_t = (algorithm, protocol), t
    if best is None:
        raise ValueError("no allowed algorithm has a search result")
    return best

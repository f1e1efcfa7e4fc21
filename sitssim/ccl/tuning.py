"""NCCL's cost model: the time NCCL 2.20.3 expects a collective to take, and its choice.

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

These are NCCL's own estimates, the inputs of its choice, not measurements: nothing here is
a reference for the model's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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


def latency_us(algorithm: str, protocol: str, operation: str, n_ranks: int, hw: str) -> float:
    """NCCL's modelled latency of one call on one node whose GPUs are joined by ``hw``.

    A ring pays its base plus one hardware latency per step; a tree (all-reduce only) twice
    its depth of n - 1 ranks below the root on one node; NVLS its hardware latency alone.
    """
    if (algorithm, protocol) not in BASE_LATENCY_US or hw not in HW_LATENCY_US:
        raise ValueError(f"no latency for {algorithm!r} / {protocol!r} on {hw!r}")
    step = HW_LATENCY_US[hw][(algorithm, protocol)]
    base = BASE_LATENCY_US[(algorithm, protocol)]
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
RING_LL128_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 36.7})
"""``perChMaxRingLL128Bws`` on one node (GB/s per channel)."""
TREE_LL128_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 20.0, "ampere": 20.0, "hopper": 36.7})
"""``perChMaxTreeLL128Bws`` on one node (GB/s per channel)."""
TREE_MAX_PER_CHANNEL_GBPS = MappingProxyType({"volta": 26.5, "ampere": 24.0, "hopper": 38.7})
"""``perChMaxTreeBws`` on one node (GB/s per channel)."""

# Bus bandwidth factors per protocol on one node (ncclTopoTuneModel): LL carries half its
# lines' bytes and pays flag polling, LL128 120 of 128 bytes less its own overheads.
RING_LL_FACTOR = 1 / 3
RING_LL_REDUCING_FACTOR = 1 / 4
"""Ring LL's factor for all-reduce and reduce (and on several nodes): 1/4, else 1/3."""
LL128_FACTOR = 0.92
TREE_FACTOR = 0.92
TREE_LL_FACTOR = 1 / 3.8
TREE_LL128_FACTOR = 7 / 9
NVLS_ALGORITHM_FACTOR = 5 / 6
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
    """What NCCL's topology search found for one algorithm: channels, and GB/s per channel."""

    channels: int
    per_channel_GBps: float


def bus_bandwidth_GBps(
    algorithm: str, protocol: str, operation: str, search: SearchResult, generation: str
) -> float:
    """NCCL's bus bandwidth for (algorithm, protocol) on one node."""
    if generation not in GENERATIONS:
        raise ValueError(f"generation must be one of {GENERATIONS}, got {generation!r}")
    bw = search.channels * search.per_channel_GBps
    ch = search.channels
    if algorithm == "ring":
        if protocol == "ll":
            reducing = operation in ("all_reduce", "reduce")
            factor = RING_LL_REDUCING_FACTOR if reducing else RING_LL_FACTOR
            return min(bw * factor, LL_MAX_GBPS[generation])
        if protocol == "ll128":
            return min(bw * LL128_FACTOR, ch * RING_LL128_MAX_PER_CHANNEL_GBPS[generation])
        return bw
    if algorithm == "tree":
        bw = min(bw * TREE_FACTOR, ch * TREE_MAX_PER_CHANNEL_GBPS[generation])
        if protocol == "ll":
            return min(bw * TREE_LL_FACTOR, LL_MAX_GBPS[generation])
        if protocol == "ll128":
            return min(bw * TREE_LL128_FACTOR, ch * TREE_LL128_MAX_PER_CHANNEL_GBPS[generation])
        return bw
    if algorithm == "nvls" and protocol == "simple":
        return bw
    raise ValueError(f"no bandwidth for {algorithm!r} / {protocol!r} on one node")


def algorithm_bandwidth_GBps(
    algorithm: str,
    protocol: str,
    operation: str,
    n_ranks: int,
    search: SearchResult,
    generation: str,
) -> float:
    """Bytes of the user's buffer per second: bus bandwidth over what each rank moves."""
    bus = bus_bandwidth_GBps(algorithm, protocol, operation, search, generation)
    if algorithm == "ring":
        return bus * n_ranks / ring_steps(operation, n_ranks)
    if algorithm == "nvls":
        return bus * NVLS_ALGORITHM_FACTOR
    return bus * TREE_ALGORITHM_FACTOR


def time_us(
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
    bw = algorithm_bandwidth_GBps(algorithm, protocol, operation, n_ranks, search, generation)
    if algorithm == "tree":
        bw *= tree_correction(protocol, n_bytes)
    return latency_us(algorithm, protocol, operation, n_ranks, hw) + n_bytes / (1000.0 * bw)


def candidates(operation: str, n_ranks: int, generation: str, nvswitch: bool) -> list[Key]:
    """The (algorithm, protocol) pairs NCCL 2.20.3 considers on one node, in its scan order:
    the tree for all-reduce; ring always; NVLS (Simple only) for all-reduce on Hopper behind
    an NVSwitch with more than two GPUs. LL128 is on by default on the generations listed here."""
    pairs: list[Key] = []
    if operation == "all_reduce":
        pairs += [("tree", p) for p in PROTOCOL_NAMES]
    pairs += [("ring", p) for p in PROTOCOL_NAMES]
    if operation == "all_reduce" and generation == "hopper" and nvswitch and n_ranks > 2:
        pairs.append(("nvls", "simple"))
    return pairs


def choose(
    operation: str,
    n_bytes: int,
    n_ranks: int,
    searches: dict[str, SearchResult],
    generation: str,
    nvswitch: bool,
    hw: str = "nvlink",
    allowed: Callable[[Key], bool] | None = None,
) -> Key:
    """NCCL's choice: the candidate pair with the least modelled time (the first listed on a
    tie, as NCCL scans algorithms then protocols). ``searches`` by algorithm; an algorithm
    without one is not a candidate, nor a pair ``allowed`` refuses (as NCCL_ALGO and
    NCCL_PROTO narrow the choice)."""
    best: Key | None = None
    best_t = math.inf
    for algorithm, protocol in candidates(operation, n_ranks, generation, nvswitch):
        if algorithm not in searches or (
            allowed is not None and not allowed((algorithm, protocol))
        ):
            continue
        t = time_us(
            algorithm, protocol, operation, n_bytes, n_ranks, searches[algorithm], generation, hw
        )
        if t < best_t:
            best, best_t = (algorithm, protocol), t
    if best is None:
        raise ValueError("no allowed algorithm has a search result")
    return best

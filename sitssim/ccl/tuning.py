"""NCCL's cost model, latency part: what NCCL 2.20.3 charges a collective before its bytes.

Theory of operation
-------------------
NCCL picks an algorithm and a protocol for each call by the smallest modelled time, a
latency plus bytes over a bandwidth (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in
``src/graph/tuning.cc`` at commit b6475625, NCCL 2.20.3; ``docs/ccl_sources.md`` §1). The
latency is a base per (algorithm, protocol), ``baseLat``, plus a per-step hardware latency
per link type, ``hwLat``, times the steps the algorithm takes: a ring all-reduce 2(n - 1),
a ring all-gather or reduce-scatter n - 1, a tree twice its depth in ranks; NVLS pays the
hardware latency alone, in place of the base. This module holds those tables as data and
the latency rule for one node (several nodes add network terms not modelled here); the
bandwidth term needs the topology search's result and follows it.

These are NCCL's own estimates, the inputs of its choice, not measurements: nothing here is
a reference for the model's accuracy.
"""

from __future__ import annotations

from types import MappingProxyType

ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree")
PROTOCOL_NAMES = ("ll", "ll128", "simple")
HARDWARE = ("nvlink", "pci", "net")


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

"""Synthetic traffic and round-trip probes, generated up front as arrays.

Open-loop arrivals do not depend on the fabric's state, so every workload's
injections are drawn before the simulation starts, vectorised, and merged
into one time-sorted ``Schedule`` that a single injector walks. Only probe
*completions* are created during the run (their time depends on the fabric).

Destination patterns follow Dally & Towles, *Principles and Practices of
Interconnection Networks*, ch. 3, over GPU indices 0..N-1 (b = log2 N bits):

=============== ==========================================================
uniform_random  each message to a GPU drawn uniformly from the others (or
                from ``destinations``, less the source itself)
permutation     a random derangement fixed for the run
hotspot         a fraction of messages to one GPU, the rest uniform
tornado         i -> (i + max(1, ceil(N/2) - 1)) mod N
bit_complement  i -> (N - 1) XOR i                       (N a power of two)
transpose       i -> i rotated left by floor(b/2) bits   (N a power of two)
shuffle         i -> i rotated left by 1 bit             (N a power of two)
pair            every message from ``src`` to ``dst``
=============== ==========================================================

A source whose pattern maps it to itself does not inject. ``load`` is a
fraction of the source's injection bandwidth: the payload bandwidth of all of
its outgoing links together.
"""

from __future__ import annotations

import numpy as np

from sitssim.config.synthetic_config import ProbeWorkload, SyntheticWorkload
from sitssim.errors import Locator
from sitssim.fabric.messages import KIND_DATA, KIND_PROBE_REQUEST
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric
from sitssim.rng import component_rng
from sitssim.workloads.gpu_names import require_gpu
from sitssim.workloads.section import WorkloadSection

ScheduleSection = WorkloadSection[SyntheticWorkload | ProbeWorkload]
"""The schedule's section: the ``synthetic`` and ``probes`` workloads."""


def _arrival_times(
    rng: np.random.Generator, start: float, stop: float, mean: float, poisson: bool
) -> np.ndarray:
    if start >= stop:
        return np.zeros(0)
    if not poisson:
        return start + mean * np.arange(int(np.ceil((stop - start) / mean)))
    expected = (stop - start) / mean
    chunks = []
    t = start
    while t < stop:
        n = int(expected * 1.1 + 10 * np.sqrt(expected) + 16)
        times = t + np.cumsum(rng.exponential(mean, n))
        chunks.append(times)
        t = times[-1]
    times = np.concatenate(chunks)
    return times[times < stop]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _rotate_left(i: np.ndarray, by: int, bits: int) -> np.ndarray:
    by %= bits
    mask = (1 << bits) - 1
    return ((i << by) | (i >> (bits - by))) & mask


def fixed_destinations(pattern: str, n: int, rng: np.random.Generator) -> np.ndarray:
    i = np.arange(n)
    if pattern == "tornado":
        return (i + max(1, -(-n // 2) - 1)) % n
    if pattern == "bit_complement":
        return (n - 1) ^ i
    bits = n.bit_length() - 1
    if pattern == "transpose":
        return _rotate_left(i, bits // 2, bits) if bits else i
    if pattern == "shuffle":
        return _rotate_left(i, 1, bits) if bits else i
    if pattern == "permutation":
        if n < 2:
            return i
        while True:
            perm = rng.permutation(n)
            if not np.any(perm == i):
                return perm
    raise AssertionError(pattern)


def _gpu_index(where: Locator, fabric: Fabric, loc: tuple, name: str) -> int:
    require_gpu(where, fabric, loc, name)
    return fabric.gpus.index(name)


def synthetic_endpoints(
    i: int, wl: SyntheticWorkload, where: Locator, fabric: Fabric
) -> tuple[list[int], int | None, int]:
    """Source GPU indices, the pair's destination and the hotspot, checked against the
    fabric (``InputError`` if the pattern or a node does not fit it)."""
    n = len(fabric.gpus)
    loc = ("workloads", i)
    if wl.pattern in ("bit_complement", "transpose", "shuffle") and not _is_pow2(n):
        raise where.error(
            (*loc, "pattern"), f"pattern {wl.pattern!r} needs a power-of-two GPU count, not {n}"
        )
    if wl.pattern != "pair" and n < 2:
        raise where.error((*loc, "pattern"), "a traffic pattern needs at least two GPUs")
    pair_dst = None
    if wl.pattern == "pair":
        sources = [_gpu_index(where, fabric, (*loc, "src"), wl.src)]
        pair_dst = _gpu_index(where, fabric, (*loc, "dst"), wl.dst)
    elif wl.sources is not None:
        sources = [
            _gpu_index(where, fabric, (*loc, "sources", k), s) for k, s in enumerate(wl.sources)
        ]
    else:
        sources = list(range(n))
    hotspot = 0
    if wl.hotspot is not None:
        hotspot = _gpu_index(where, fabric, (*loc, "hotspot"), wl.hotspot)
    return sources, pair_dst, hotspot


def synthetic_destinations(
    i: int, wl: SyntheticWorkload, where: Locator, fabric: Fabric, sources: list[int]
) -> list[int] | None:
    """GPU indices of a workload's ``destinations`` (None: every GPU), checked against the
    fabric and the sources (``InputError`` for a source left nowhere to send)."""
    if wl.destinations is None:
        return None
    loc = ("workloads", i, "destinations")
    dests = [_gpu_index(where, fabric, (*loc, k), d) for k, d in enumerate(wl.destinations)]
    if len(dests) == 1 and dests[0] in sources:
        raise where.error(
            loc, f"{fabric.gpus[dests[0]]!r} is a source too, and sends to no one else"
        )
    return dests


def _synthetic(
    i: int,
    wl: SyntheticWorkload,
    section: ScheduleSection,
    where: Locator,
    fabric: Fabric,
    node_id: dict[str, int],
) -> list[tuple]:
    rng = component_rng(section.seed, "workload", wl.name or f"#{i}")
    n = len(fabric.gpus)
    sources, pair_dst, hotspot = synthetic_endpoints(i, wl, where, fabric)
    dests = synthetic_destinations(i, wl, where, fabric, sources)
    fixed = None
    if wl.pattern not in ("pair", "uniform_random", "hotspot"):
        fixed = fixed_destinations(wl.pattern, n, rng)
    stop = wl.stop if wl.stop is not None else section.duration
    tenant = section.tenant_index(wl.tenant)
    out = []
    for s in sources:
        if fixed is not None and fixed[s] == s:
            continue
        src_name = fabric.gpus[s]
        if wl.load is not None:
            mean = wl.message_bytes / (wl.load * fabric.injection_bytes_per_ns[src_name])
        else:
            mean = wl.interval
        source_rng = component_rng(section.seed, "workload", wl.name or f"#{i}", "source", s)
        times = _arrival_times(source_rng, wl.start, stop, mean, wl.arrivals == "poisson")
        count = len(times)
        if wl.pattern == "pair":
            dst = np.full(count, pair_dst)
        elif fixed is not None:
            dst = np.full(count, fixed[s])
        elif dests is not None:
            others = np.array([d for d in dests if d != s])
            dst = others[source_rng.integers(0, len(others), count)]
        else:
            dst = (s + 1 + source_rng.integers(0, n - 1, count)) % n
            if wl.pattern == "hotspot" and s != hotspot:
                dst = np.where(source_rng.random(count) < wl.hotspot_fraction, hotspot, dst)
        gpu_ids = np.array([node_id[g] for g in fabric.gpus])
        out.append((times, node_id[src_name], gpu_ids[dst], wl.message_bytes, tenant, KIND_DATA, i))
    return out


def default_requester(fabric: Fabric) -> str:
    return fabric.root if fabric.root is not None else fabric.gpus[0]


def probe_endpoints(
    i: int, wl: ProbeWorkload, where: Locator, fabric: Fabric
) -> tuple[str, list[str]]:
    """The requester and its targets, checked against the fabric."""
    loc = ("workloads", i)
    requester = wl.requester or default_requester(fabric)
    if requester not in fabric.graph:
        raise where.error((*loc, "requester"), f"unknown node {requester!r}")
    if fabric.node_kind(requester) == "switch":
        raise where.error((*loc, "requester"), f"{requester!r} is a switch; it issues no requests")
    if wl.targets is None:
        targets = [g for g in fabric.gpus if g != requester]
    else:
        targets = [
            fabric.gpus[_gpu_index(where, fabric, (*loc, "targets", k), t)]
            for k, t in enumerate(wl.targets)
        ]
        if requester in targets:
            raise where.error((*loc, "targets"), "a requester cannot probe itself")
    return requester, targets


def _probes(
    i: int,
    wl: ProbeWorkload,
    section: ScheduleSection,
    where: Locator,
    fabric: Fabric,
    node_id: dict[str, int],
) -> list[tuple]:
    requester, targets = probe_endpoints(i, wl, where, fabric)
    tenant = section.tenant_index(wl.tenant)
    out = []
    for j, target in enumerate(targets):
        # Stagger targets across the interval so probes do not queue behind each other.
        phase = wl.start + wl.interval * j / len(targets)
        times = _arrival_times(None, phase, section.duration, wl.interval, poisson=False)
        out.append(
            (
                times,
                node_id[requester],
                node_id[target],
                wl.request_bytes,
                tenant,
                KIND_PROBE_REQUEST,
                i,
            )
        )
    return out


def check_schedule_workloads(section: ScheduleSection, fabric: Fabric, where: Locator) -> None:
    """Everything ``build_schedule`` would reject, without drawing a single arrival (a
    long run's schedule is its biggest allocation, so the check must not build it)."""
    for i, wl in section.workloads:
        if isinstance(wl, SyntheticWorkload):
            sources, _, _ = synthetic_endpoints(i, wl, where, fabric)
            synthetic_destinations(i, wl, where, fabric, sources)
        else:
            probe_endpoints(i, wl, where, fabric)


def build_schedule(
    section: ScheduleSection, fabric: Fabric, node_id: dict[str, int], where: Locator
) -> Schedule:
    """Draw every workload's injections and merge them into one sorted schedule."""
    parts: list[tuple] = []
    for i, wl in section.workloads:
        if isinstance(wl, SyntheticWorkload):
            parts.extend(_synthetic(i, wl, section, where, fabric, node_id))
        else:
            parts.extend(_probes(i, wl, section, where, fabric, node_id))
    if not parts:
        empty = np.zeros(0)
        return Schedule(empty, *(np.zeros(0, dtype=np.int64) for _ in range(6)))
    t = np.concatenate([p[0] for p in parts])
    columns = [
        np.concatenate(
            [np.broadcast_to(np.asarray(p[k], dtype=np.int64), len(p[0])) for p in parts]
        )
        for k in range(1, 7)
    ]
    order = np.argsort(t, kind="stable")
    return Schedule(t[order], *(c[order] for c in columns))

"""What a run will cost, from the validated scenario and the built fabric, before it starts.

A run that cannot fit the machine must be refused before it allocates anything, and the
refusal must come from ``validate`` too, so the estimate is arithmetic over the scenario:
rates times durations, sizes over message caps, GPU counts. It never draws an arrival or
walks a message; its cost is one breadth-first search of the fabric plus a loop over the
workloads (``tests/test_estimate.py`` counts that it never calls into the schedule builder).

Messages come from one estimator per workload kind (``ESTIMATORS``; a new kind is one
function and one registry line), plus the clock stage's sync exchanges and fences.

Memory model (RSS peak of ``sitssim run SCENARIO --out DIR --no-figures``)::

    bytes = BASE_BYTES + messages * (MESSAGE_BYTES + HOP_BYTES * mean_hops)
            + links * LINK_BYTES + replay_rows * REPLAY_ROW_BYTES
            + crossings * CROSSING_BYTES

How the constants were measured (``benchmarks/bench_memory_estimate.py`` reruns it): peak RSS
from ``/usr/bin/time -f %M`` (``ru_maxrss`` of the child) on Linux x86-64, CPython 3.11,
numpy 2 / pandas 2 / pyarrow. Importing sitssim's run path alone holds 187 MB; every shipped
scenario peaks at 238-308 MB. Runs of one scenario at two sizes give the slope per message:
fat_tree_8gpu at 200 µs and 2 ms (30 k and 298 k messages, 268 and 414 MB), tso_loaded at
200 µs and 1 ms (48 k and 240 k, 288 and 359 MB), hgx_h100 with 1 and 3 repetitions (151 k
and 453 k, 308 and 392 MB): 545, 370 and 278 bytes a message at about 3.5, 3.5 and 2 hops,
fitted as 200 + 80 per hop (rounded up: the data-heavier nvswitch_8gpu at 1 ms and
direct_rc_host_io at 500 µs, 158 k and 155 k messages, peak at 356 and 392 MB). The
intercepts, 250-270 MB, fix BASE_BYTES. A 64-GPU three-level fat tree (97 links, 7 k
messages) peaks at 311 MB against 255 MB for the 17-link tree at the same traffic, so a link
(PHY training traces, link-state rows, CDC evaluation, VCD) cost 0.7 MB then. Since the
PHY's EQ stream stopped joining its blocks into whole arrays, the 1024-GPU fat tree
(scenarios/scale, 2,049 links) peaks at 1.02 GB, which leaves 0.2 MB a link beyond its
messages; LINK_BYTES = 0.5 MB keeps both within 2x of the peak (the 8-GPU fabrics barely
notice a link's share). A
replayed flit session logs one row per Nak or timeout (charged like a small message). An
input-queued switch logs every crossing and turns the log into its tables after the run:
the 8 x 8 reference bench (scenarios/reference/switch_hol.yaml, 203 k cells, one crossing
each) peaks at 499 MB against 400 MB with output-queued switches, so CROSSING_BYTES = 500
(a crossing is a message times the switches on its route, mean hops less one).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, get_args

import networkx as nx

from sitssim.ccl.nvls import nvls_plan
from sitssim.ccl.plan import ring_plan
from sitssim.config.collective_config import CollectiveWorkload
from sitssim.config.inference_config import InferenceWorkload
from sitssim.config.p2p_config import P2pWorkload
from sitssim.config.tenant_requests_config import TenantRequestsWorkload
from sitssim.config.transaction_config import TransactionWorkload
from sitssim.errors import InputError, Locator
from sitssim.fabric.topology import Fabric
from sitssim.scenario import ProbeWorkload, Scenario, SyntheticWorkload, Workload
from sitssim.stages.flit import replay_probabilities
from sitssim.units import UnitError, parse_size_bytes
from sitssim.workloads.ccl_choice import CallChooser
from sitssim.workloads.ccl_nvls import nvls_messages
from sitssim.workloads.ccl_ring import ring_messages
from sitssim.workloads.collectives import binary_tree, chunk_sizes, messages_per_send
from sitssim.workloads.custom_allreduce import custom_messages
from sitssim.workloads.peer_copies import ENGINE_WRITES, workload_pairs
from sitssim.workloads.synthetic import (
    fixed_destinations,
    probe_endpoints,
    synthetic_endpoints,
)

BASE_BYTES = 250e6
MESSAGE_BYTES = 200.0
HOP_BYTES = 80.0
LINK_BYTES = 0.5e6
REPLAY_ROW_BYTES = 200.0
CROSSING_BYTES = 500.0
MEMORY_ENV = "SITSSIM_MEMORY_LIMIT"
# A fence or a sync exchange is a request and its answer.
CLOCK_MESSAGES_PER_EXCHANGE = 2


@dataclass
class WorkloadEstimate:
    """Messages one workload injects, and the scenario field that scales them."""

    messages: float
    field: tuple


@dataclass
class Estimate:
    """Size of a run: what the summary line prints and what the memory check compares."""

    nodes: int
    links: int
    mean_hops: float
    workloads: list[WorkloadEstimate] = field(default_factory=list)
    clock_messages: float = 0.0
    replay_rows: float = 0.0
    crossings_per_message: float = 0.0
    """Input-queued switch crossings per message (0 with output-queued switches)."""

    @property
    def messages(self) -> float:
        return sum(w.messages for w in self.workloads) + self.clock_messages

    @property
    def hop_events(self) -> float:
        return self.messages * self.mean_hops

    @property
    def message_bytes(self) -> float:
        """What one message costs: its record, its hops and its switch crossings."""
        return (
            MESSAGE_BYTES + HOP_BYTES * self.mean_hops + CROSSING_BYTES * self.crossings_per_message
        )

    @property
    def memory_bytes(self) -> float:
        return (
            BASE_BYTES
            + self.messages * self.message_bytes
            + self.links * LINK_BYTES
            + self.replay_rows * REPLAY_ROW_BYTES
        )

    def driver(self) -> tuple[tuple, str]:
        """The field that drives the estimate most, and the advice that shrinks it."""
        per_message = self.message_bytes
        replay = self.replay_rows * REPLAY_ROW_BYTES
        biggest = max(self.workloads, key=lambda w: w.messages, default=None)
        if biggest is not None and biggest.messages * per_message >= replay:
            if biggest.field[-1] == "duration":
                return biggest.field, "shorten 'duration' or use fewer GPUs"
            name = ".".join(map(str, biggest.field[-1:]))
            return biggest.field, f"lower '{name}' or use fewer GPUs"
        if replay > 0:
            return ("link_layer", "flit", "pre_fec_ber"), "lower 'link_layer.flit.pre_fec_ber'"
        return ("duration",), "shorten 'duration' or use fewer GPUs"

    def summary(self) -> str:
        return f"~{_si(self.messages)} messages, ~{_si(self.memory_bytes, 'B')}"

    def at_flow_fidelity(self) -> Estimate:
        """The same run at ``fidelity: flow``: no clock exchanges, replay rows or switch
        crossings (their stages are not built); each message keeps its record and its
        per-hop share, which the fluid run's routes and flow state take instead."""
        return replace(self, clock_messages=0.0, replay_rows=0.0, crossings_per_message=0.0)


def _si(n: float, unit: str = "") -> str:
    """``29.8k``, or with a unit ``275 MB``: three digits and a decimal prefix."""
    space = " " if unit else ""
    if not math.isfinite(n):
        return f"inf{space}{unit}"
    for div, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{space}{prefix}{unit}"
    return f"{n:.0f}{space}{unit}"


# --- per-workload estimators ----------------------------------------------------------


def _synthetic(
    scenario: Scenario, fabric: Fabric, i: int, wl: SyntheticWorkload
) -> WorkloadEstimate:
    sources, _, _ = synthetic_endpoints(i, wl, Locator(scenario.error), fabric)
    n = len(fabric.gpus)
    if wl.pattern in ("transpose", "shuffle", "tornado", "bit_complement"):
        fixed = fixed_destinations(wl.pattern, n, None)
        sources = [s for s in sources if fixed[s] != s]
    stop = wl.stop if wl.stop is not None else scenario.duration
    span = max(0.0, stop - wl.start)
    total = 0.0
    for s in sources:
        if wl.load is not None:
            rate = wl.load * fabric.injection_bytes_per_ns[fabric.gpus[s]] / wl.message_bytes
        else:
            rate = 1.0 / wl.interval
        total += span * rate
    return WorkloadEstimate(total, ("duration",))


def _probes(scenario: Scenario, fabric: Fabric, i: int, wl: ProbeWorkload) -> WorkloadEstimate:
    _, targets = probe_endpoints(i, wl, Locator(scenario.error), fabric)
    span = max(0.0, scenario.duration - wl.start)
    return WorkloadEstimate(2.0 * len(targets) * span / wl.interval, ("duration",))


def collective_messages(
    operation: str, algorithm: str, n: int, size: int, max_message: int, min_messages: int
) -> float:
    """Messages of one collective of ``size`` bytes over ``n`` ranks."""
    if n < 2:
        return 0.0
    chunk = max(1, size // n)
    per_chunk = messages_per_send(chunk, max_message, min_messages)
    if algorithm == "one_shot":
        return n * (n - 1) * messages_per_send(size, max_message, min_messages)
    if algorithm == "tree":
        edges = sum(1 for p in binary_tree(n) if p >= 0)
        halves = ((size + 1) // 2, size // 2)
        segments = sum(
            len(chunk_sizes(h, messages_per_send(h, max_message, min_messages)))
            for h in halves
            if h
        )
        return 2.0 * edges * segments
    if operation == "all_reduce":
        return 2.0 * n * (n - 1) * per_chunk
    return 1.0 * n * (n - 1) * per_chunk


def _nccl_call_messages(chooser: CallChooser, operation: str, size: int, max_message: int) -> int:
    """Messages of one call of ``size`` bytes as NCCL runs it, ``chooser`` picking it."""
    call = chooser.call(size)
    if call.algorithm == "nvls":
        plan = nvls_plan(size, chooser.n_ranks, call.channels)
        return nvls_messages(plan, max_message, call.writes)
    ring = ring_plan(operation, call.protocol, size, chooser.n_ranks, call.channels)
    return ring_messages(ring, size, max_message, call.writes)


def _collective(
    scenario: Scenario, fabric: Fabric, i: int, wl: CollectiveWorkload
) -> WorkloadEstimate:
    """Collectives run to completion whatever the duration: their sizes, repetitions and
    message split decide the count."""
    gpus = list(wl.gpus) if wl.gpus is not None else list(fabric.gpus)
    n = len(gpus)
    sizes = wl.sizes if wl.sizes is not None else wl.sweep.sizes()
    if wl.custom is not None and n >= 2:
        one_pass = sum(custom_messages(n, s, wl.max_message_bytes) for s in sizes)
    elif wl.runs_as_nccl and n >= 2:
        chooser = CallChooser(wl, fabric, gpus, scenario.switch.capabilities())
        one_pass = float(
            sum(_nccl_call_messages(chooser, wl.operation, s, wl.max_message_bytes) for s in sizes)
        )
    else:
        one_pass = sum(
            collective_messages(
                wl.operation, wl.algorithm, n, s, wl.max_message_bytes, wl.min_messages
            )
            for s in sizes
        )
    key = "sizes" if wl.sizes is not None else "sweep"
    if wl.min_messages > 1:
        key = "min_messages"
    return WorkloadEstimate(one_pass * wl.repetitions, ("workloads", i, key))


def _transactions(
    scenario: Scenario, fabric: Fabric, i: int, wl: TransactionWorkload
) -> WorkloadEstimate:
    targets = len(wl.targets) if wl.targets is not None else max(1, len(fabric.gpus) - 1)
    stop = wl.stop if wl.stop is not None else scenario.duration
    span = max(0.0, stop - wl.start)
    # A write is posted; a read adds its completion.
    messages = targets * span / wl.interval * (1.0 + wl.read_fraction)
    return WorkloadEstimate(messages, ("duration",))


def _tenant_requests(
    scenario: Scenario, fabric: Fabric, i: int, wl: TenantRequestsWorkload
) -> WorkloadEstimate:
    sources = wl.sources if wl.sources is not None else fabric.gpus
    stop = wl.stop if wl.stop is not None else scenario.duration
    span = max(0.0, stop - wl.start)
    per_ns = 0.0
    for src in sources:
        if wl.interval is not None:
            per_ns += 1.0 / wl.interval
        else:
            assert wl.load is not None
            per_ns += wl.load * fabric.injection_bytes_per_ns[src] / wl.response_bytes
    # Each request brings its completion back.
    return WorkloadEstimate(2.0 * span * per_ns, ("duration",))


# The inference drivers of the scenario being estimated, kept for the length of one
# ``estimate`` call: building them lays a transport over the whole fabric, and each
# inference workload's estimate would otherwise build them all again.
_drivers_built: dict[int, Any] | None = None


def _inference_drivers(scenario: Scenario, fabric: Fabric) -> dict[int, Any]:
    global _drivers_built
    from sitssim.stages.inference import inference_section
    from sitssim.workloads.inference import inference_drivers

    if _drivers_built is None:
        _drivers_built = inference_drivers(
            inference_section(scenario), fabric, Locator(scenario.error)
        )
    return _drivers_built


def _inference(
    scenario: Scenario, fabric: Fabric, i: int, wl: InferenceWorkload
) -> WorkloadEstimate:
    """Steps (per request, a prefill and one per generated token after the first: batching
    only merges them) times each step's tensor-parallel collectives, each as the run makes it
    (NCCL's call, the serving engine's kernel or the bare algorithm): two all-reduces a layer
    and the output head's all-gather of one token's logits; and pipeline sends."""
    from sitssim.workloads.inference import ACTIVATION_BYTES, collective_runner

    driver = _inference_drivers(scenario, fabric)[i]
    model = driver.model
    tp = len(driver.stages[0])
    pp = len(driver.stages)

    def call_messages(operation: str, size: int) -> float:
        if tp < 2:
            return 0.0
        runner = collective_runner(wl.collective, operation, tp, size)
        if runner == "custom":
            return custom_messages(tp, size, wl.max_message)
        if runner == "auto":
            chooser = driver.nccl_calls(0, operation).chooser
            return _nccl_call_messages(chooser, operation, size, wl.max_message)
        return collective_messages(operation, runner, tp, size, wl.max_message, wl.min_messages)

    gather = call_messages("all_gather", model.vocab * ACTIVATION_BYTES)

    def step_messages(tokens: int) -> float:
        activation = tokens * model.hidden * ACTIVATION_BYTES
        reduce = 2 * model.n_layers * call_messages("all_reduce", activation)
        return reduce + gather + (pp - 1) * tp * max(1, -(-activation // wl.max_message))

    # The prefill yields a request's first token and every decode step one more, so a
    # request costs its prefill plus target - 1 decode steps: arithmetic per request, never
    # a loop over its tokens.
    decode = step_messages(1)
    messages = float(
        sum(step_messages(r.prompt) + max(r.target - 1, 0) * decode for r in driver.requests)
    )
    return WorkloadEstimate(messages, ("workloads", i, "requests"))


def _p2p(scenario: Scenario, fabric: Fabric, i: int, wl: P2pWorkload) -> WorkloadEstimate:
    """Every run's copies over every pair, each as many messages as its write packets fill."""
    pairs = len(workload_pairs(wl, fabric))
    writes = ENGINE_WRITES[wl.engine]
    messages = 0.0
    for run in wl.runs:
        per_copy = messages_per_send(writes.wire_bytes(run.bytes), wl.max_message_bytes)
        streams = 2 if run.direction == "both" else 1
        messages += pairs * streams * run.copies * per_copy
    return WorkloadEstimate(messages, ("workloads", i, "runs"))


Estimator = Callable[[Scenario, Fabric, int, Any], WorkloadEstimate]
ESTIMATORS: dict[type, Estimator] = {
    SyntheticWorkload: _synthetic,
    ProbeWorkload: _probes,
    TransactionWorkload: _transactions,
    TenantRequestsWorkload: _tenant_requests,
    CollectiveWorkload: _collective,
    InferenceWorkload: _inference,
    P2pWorkload: _p2p,
}


def _kinds_without_estimator() -> list[str]:
    union = get_args(Workload)[0]
    return sorted(m.__name__ for m in get_args(union) if m not in ESTIMATORS)


# A workload kind the schema accepts but the estimate cannot size would reach the run as a
# KeyError (exit 3): refuse at import instead, as the judge registry does for clauses.
if _kinds_without_estimator():
    raise TypeError(f"workload kinds without an estimator: {_kinds_without_estimator()}")


def _mean_hops(fabric: Fabric) -> float:
    """Mean hop count from the first GPU to the others: one BFS, linear in the fabric."""
    if len(fabric.gpus) < 2:
        return 1.0
    dist = nx.single_source_shortest_path_length(fabric.graph, fabric.gpus[0])
    hops = [dist[g] for g in fabric.gpus[1:] if g in dist]
    return sum(hops) / len(hops) if hops else 1.0


def _clock_messages(scenario: Scenario, fabric: Fabric) -> float:
    clocks = scenario.clocks
    if not clocks.enabled:
        return 0.0
    total = 0.0
    if clocks.sync:
        total += fabric.graph.number_of_edges() * scenario.duration / clocks.sync_interval
    total += len(fabric.gpus) * scenario.duration / clocks.fence_interval
    return CLOCK_MESSAGES_PER_EXCHANGE * total


def _flits(n_bytes: float) -> float:
    return math.ceil(n_bytes / 236.0)


def estimate(scenario: Scenario, fabric: Fabric) -> Estimate:
    """The run's size: nodes, links, messages per workload, replay rows and memory."""
    est = Estimate(
        nodes=fabric.graph.number_of_nodes(),
        links=len(fabric.channels) // 2,
        mean_hops=_mean_hops(fabric),
    )
    global _drivers_built
    try:
        for i, wl in enumerate(scenario.workloads):
            est.workloads.append(ESTIMATORS[type(wl)](scenario, fabric, i, wl))
    finally:
        _drivers_built = None
    est.clock_messages = _clock_messages(scenario, fabric)
    if scenario.switch.model == "input_queued" and fabric.switches:
        est.crossings_per_message = max(est.mean_hops - 1.0, 0.0)
    p = max(replay_probabilities(scenario.link_layer.flit, fabric).values(), default=0.0)
    if p > 0:
        # Each flit fails geometrically often (p / (1 - p) times); each failure logs a row.
        flits_per_message = _flits(_mean_message_bytes(scenario))
        failures = math.inf if p >= 1.0 else p / (1.0 - p)
        est.replay_rows = est.messages * est.mean_hops * flits_per_message * failures
    return est.at_flow_fidelity() if scenario.fidelity == "flow" else est


def _mean_message_bytes(scenario: Scenario) -> float:
    sizes = [
        wl.message_bytes for wl in scenario.workloads if isinstance(wl, SyntheticWorkload)
    ] or [4096.0]
    return sum(sizes) / len(sizes)


def parse_memory(text: str) -> float:
    """``2GB`` or ``512MiB``, as sizes are written in scenarios."""
    try:
        return float(parse_size_bytes(text))
    except UnitError as exc:
        raise InputError(str(exc), field=MEMORY_ENV) from None


def available_memory() -> float:
    """Bytes this run may use: ``SITSSIM_MEMORY_LIMIT``, else MemAvailable, else all RAM."""
    limit = os.environ.get(MEMORY_ENV)
    if limit:
        return parse_memory(limit)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return math.inf


def check_fits(scenario: Scenario, est: Estimate) -> None:
    """Refuse (``InputError`` at the field that drives it) a run the machine cannot hold."""
    need = est.memory_bytes
    have = available_memory()
    if need <= have:
        return
    loc, advice = est.driver()
    if scenario.fidelity == "packet":
        fluid = est.at_flow_fidelity().memory_bytes
        if fluid <= have:
            advice += (
                f", or run it at flow level (fidelity: flow, or run --fidelity flow: about "
                f"{_si(fluid, 'B')}, with the clauses that need packets n/a)"
            )
    raise scenario.error(
        loc,
        f"this run needs about {_si(need, 'B')} ({_si(est.messages)} messages) but "
        f"{_si(have, 'B')} are available; {advice}",
    )

"""Transport speed: sitssim's L3 transport against a naive SimPy model and bare event loops.

Run as ``python benchmarks/bench_transport.py [--messages N] [--json PATH]``.

The workload is ``scenarios/fat_tree_8gpu.yaml``'s fabric under saturating uniform random
traffic from every GPU, probes off. sitssim and the naive model
(``benchmarks/naive_transport.py``: one process per message, a ``simpy.Resource`` per output
port) replay the same injection schedule over the same routes and delays; their mean
latencies must agree within 1 % or the script exits 1, since a speed-up over a model that
computes something else would mean nothing. The figure of merit is hop-events (one channel
crossed by a delivered message) per wall-second, timed around the simulation only, beside
two bare event loops on the same interpreter: SimPy timeouts per second, and events per
second of a plain ``heapq`` loop (pop the next event, push its successor: what any
discrete-event engine in Python must pay at least per event). The four measurements are
interleaved over several repetitions and the median of each is reported, so that load from
other processes on the machine hits them alike. Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

# Measure the checkout this script sits in, installed or not, and find the naive model beside it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from naive_transport import NaiveTransport, naive_ports, route_table
from targets import target, verdict

from sitssim.fabric.routing import Router
from sitssim.fabric.schedule import Schedule
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario, SyntheticWorkload, load_scenario
from sitssim.stages.schedule import scenario_schedule

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "fat_tree_8gpu.yaml"
# The speed-and-scale targets (the foundation's were 3x and 0.3x).
TARGET_VS_NAIVE = 6.0
TARGET_VS_BARE = 0.6
LATENCY_RTOL = 0.01
MODELS = ("sitssim", "naive", "bare", "heapq")


@dataclass
class Setup:
    """Everything both models share, built once and outside the timed region."""

    fabric: Fabric
    nodes: list[str]
    schedule: Schedule
    router: Router
    routes: dict[tuple[int, int], tuple[int, ...]]
    hop_events: int


def saturating_scenario(messages: int, load: float, seed: int) -> Scenario:
    """The example fat tree with only uniform random traffic at ``load`` on every GPU."""
    base = load_scenario(SCENARIO)
    message_bytes = next(
        wl.message_bytes for wl in base.workloads if isinstance(wl, SyntheticWorkload)
    )
    fabric = build_fabric(base)
    # Aggregate injection rate in messages per ns, to size the run by message count.
    rate = sum(load * fabric.injection_bytes_per_ns[g] / message_bytes for g in fabric.gpus)
    workload = SyntheticWorkload(
        kind="synthetic",
        name="saturating",
        pattern="uniform_random",
        arrivals="poisson",
        message_bytes=f"{message_bytes}B",
        load=load,
    )
    return base.model_copy(
        update={"seed": seed, "duration": messages / rate, "workloads": [workload]}
    )


def build(messages: int, load: float, seed: int) -> Setup:
    """The same building blocks as ``sitssim.simulation.simulate``, with every route resolved."""
    scenario = saturating_scenario(messages, load, seed)
    fabric = build_fabric(scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(nodes)})
    router = Router(fabric)
    # Resolving routes here keeps networkx path searches out of both timed regions.
    routes = route_table(router, nodes, schedule)
    pairs = zip(schedule.src.tolist(), schedule.dst.tolist(), strict=True)
    hop_events = sum(len(routes[pair]) for pair in pairs)
    return Setup(fabric, nodes, schedule, router, routes, hop_events)


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of ``run()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_sitssim(setup: Setup) -> tuple[float, float, np.ndarray]:
    """Wall and CPU seconds of ``Transport.run``, and each message's latency (ns)."""
    transport = Transport(
        simpy.Environment(), setup.fabric, setup.router, setup.nodes, setup.schedule
    )
    wall, cpu = _timed(transport.run)
    taken = [setup.router.routes[r].channels for r in transport.route_ids()]
    pairs = zip(transport.src, transport.dst, strict=True)
    if taken != [setup.routes[pair] for pair in pairs]:
        raise SystemExit("sitssim routed messages differently from the naive model's route table")
    latency = np.asarray(transport.t_deliver) - np.asarray(transport.t_inject)
    return wall, cpu, latency


def time_naive(setup: Setup) -> tuple[float, float, np.ndarray]:
    """Wall and CPU seconds of the naive model's run, and each message's latency (ns)."""
    naive = NaiveTransport(naive_ports(setup.fabric), setup.routes, setup.schedule)
    wall, cpu = _timed(naive.run)
    latency = np.asarray(naive.t_deliver) - np.asarray(naive.t_inject)
    if np.isnan(latency).any():
        raise SystemExit("the naive model left messages undelivered")
    return wall, cpu, latency


def time_bare(timeouts: int) -> tuple[float, float]:
    """Wall and CPU seconds of one SimPy process yielding ``timeouts`` timeouts."""
    env = simpy.Environment()

    def loop() -> Generator[simpy.Event, None, None]:
        for _ in range(timeouts):
            yield env.timeout(1.0)

    env.process(loop())
    return _timed(env.run)


def time_heapq(events: int) -> tuple[float, float]:
    """Wall and CPU seconds of a plain heapq loop stepping ``events`` events, each of which
    schedules the next (one pending event, as in the bare SimPy loop)."""

    def loop() -> None:
        queue: list[tuple[float, int]] = [(0.0, 0)]
        pop, push = heapq.heappop, heapq.heappush
        for seq in range(1, events + 1):
            t, _ = pop(queue)
            push(queue, (t + 1.0, seq))

    return _timed(loop)


def measure(setup: Setup, repeats: int, bare_timeouts: int) -> dict[str, object]:
    samples: dict[str, list[float]] = {
        f"{model}_{clock}_s": [] for model in MODELS for clock in ("wall", "cpu")
    }
    sitssim_latency = naive_latency = np.zeros(0)
    for _ in range(repeats):
        wall, cpu, sitssim_latency = time_sitssim(setup)
        samples["sitssim_wall_s"].append(wall)
        samples["sitssim_cpu_s"].append(cpu)
        wall, cpu, naive_latency = time_naive(setup)
        samples["naive_wall_s"].append(wall)
        samples["naive_cpu_s"].append(cpu)
        wall, cpu = time_bare(bare_timeouts)
        samples["bare_wall_s"].append(wall)
        samples["bare_cpu_s"].append(cpu)
        wall, cpu = time_heapq(bare_timeouts)
        samples["heapq_wall_s"].append(wall)
        samples["heapq_cpu_s"].append(cpu)
    sitssim_mean = float(sitssim_latency.mean())
    naive_mean = float(naive_latency.mean())
    rel_diff = abs(naive_mean - sitssim_mean) / sitssim_mean
    work = {
        "sitssim": setup.hop_events,
        "naive": setup.hop_events,
        "bare": bare_timeouts,
        "heapq": bare_timeouts,
    }
    figures: dict[str, object] = {
        "messages": len(setup.schedule),
        "hop_events": setup.hop_events,
        "bare_timeouts": bare_timeouts,
        "repeats": repeats,
        "sitssim_mean_latency_ns": sitssim_mean,
        "naive_mean_latency_ns": naive_mean,
        "latency_rel_diff": rel_diff,
        "latency_match": rel_diff <= LATENCY_RTOL,
        "target_vs_naive": TARGET_VS_NAIVE,
        "target_vs_bare": TARGET_VS_BARE,
    }
    for clock in ("wall", "cpu"):
        rate = {m: work[m] / statistics.median(samples[f"{m}_{clock}_s"]) for m in MODELS}
        suffix = "" if clock == "wall" else "_cpu"
        figures[f"sitssim_hop_events_per_s{suffix}"] = rate["sitssim"]
        figures[f"naive_hop_events_per_s{suffix}"] = rate["naive"]
        figures[f"bare_timeouts_per_s{suffix}"] = rate["bare"]
        figures[f"heapq_events_per_s{suffix}"] = rate["heapq"]
        figures[f"sitssim_vs_naive{suffix}"] = rate["sitssim"] / rate["naive"]
        figures[f"sitssim_vs_bare{suffix}"] = rate["sitssim"] / rate["bare"]
        figures[f"sitssim_vs_heapq{suffix}"] = rate["sitssim"] / rate["heapq"]
    figures["targets"] = [
        target(
            "hop-events/s against the naive model",
            figures["sitssim_vs_naive"],
            ">=",
            TARGET_VS_NAIVE,
            "x",
        ),
        target(
            "hop-events/s against bare SimPy timeouts/s",
            figures["sitssim_vs_bare"],
            ">=",
            TARGET_VS_BARE,
            "x",
        ),
        target(
            "hop-events/s against a bare heapq loop's events/s",
            figures["sitssim_vs_heapq"],
            None,
            None,
            "x",
        ),
    ]
    figures["samples"] = samples
    return figures


def report(figures: dict, load: float, message_bytes: int) -> None:
    print(
        f"workload      : 8-GPU fat tree, uniform_random {message_bytes} B at load {load:g}, "
        f"{figures['messages']:,} messages, {figures['hop_events']:,} hop-events, "
        f"median of {figures['repeats']}"
    )
    print(
        f"mean latency  : sitssim {figures['sitssim_mean_latency_ns']:.3f} ns, "
        f"naive {figures['naive_mean_latency_ns']:.3f} ns, "
        f"relative difference {figures['latency_rel_diff']:.2e} "
        f"[{'match' if figures['latency_match'] else 'MISMATCH'}: <= {LATENCY_RTOL:.0%}]"
    )
    print(f"sitssim       : {figures['sitssim_hop_events_per_s']:12,.0f} hop-events/s")
    print(f"naive SimPy   : {figures['naive_hop_events_per_s']:12,.0f} hop-events/s")
    print(f"bare SimPy    : {figures['bare_timeouts_per_s']:12,.0f} timeouts/s")
    print(f"bare heapq    : {figures['heapq_events_per_s']:12,.0f} events/s")
    on_naive, on_bare, _ = figures["targets"]
    print(
        f"sitssim/naive : {on_naive['value']:8.2f} x  (target >= {TARGET_VS_NAIVE:g} x) "
        f"[{verdict(on_naive['met'])}]"
    )
    print(
        f"sitssim/bare  : {on_bare['value']:8.2f} x  (target >= {TARGET_VS_BARE:g} x) "
        f"[{verdict(on_bare['met'])}]"
    )
    print(f"sitssim/heapq : {figures['sitssim_vs_heapq']:8.2f} x  (the Python limit: no target)")
    print(
        f"on CPU time   : sitssim/naive {figures['sitssim_vs_naive_cpu']:.2f} x, "
        f"sitssim/bare {figures['sitssim_vs_bare_cpu']:.2f} x "
        "(less disturbed by other load on a shared machine)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages injected")
    parser.add_argument("--load", type=float, default=0.95, help="offered load per GPU")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--seed", type=int, default=1, help="seed of the injection schedule")
    parser.add_argument("--bare-timeouts", type=int, default=None, help="default: hop-events")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repeats < 1 or args.load <= 0:
        parser.error("--messages and --repeats must be >= 1 and --load > 0")

    setup = build(args.messages, args.load, args.seed)
    if len(setup.schedule) == 0:
        parser.error("the workload drew no messages; raise --messages")
    figures = measure(setup, args.repeats, args.bare_timeouts or setup.hop_events)
    message_bytes = int(setup.schedule.size[0])
    figures["load"] = args.load
    figures["message_bytes"] = message_bytes
    figures["seed"] = args.seed
    figures["python"] = platform.python_version()
    figures["simpy"] = simpy.__version__
    report(figures, args.load, message_bytes)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["latency_match"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Routing benchmark: next-hop tables and routes of large two-level fat trees.

Run as ``python benchmarks/bench_routing.py``. For each size, a two-level fat tree of
radix 32 with 32 spines (full bisection: every leaf has one uplink per spine) is built,
then a fresh ``Router`` answers one route for every ordered pair of GPUs, as a uniform
random run that reaches every pair would ask. Two phases are timed apart: the tables
(one breadth-first search per destination, every GPU) and the routes (the k-th tied path
of each pair walked down the tables, its channels, its ``Route``). Each figure is the
best of ``--repeats`` (least disturbed by other load), wall and CPU time. Not a test:
nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import sys
import time
from itertools import permutations
from pathlib import Path

# Measure the checkout this script sits in, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data

RADIX = 32
SPINES = 32


def fat_tree(gpus: int) -> Fabric:
    topology = {"kind": "fat_tree", "gpus": gpus, "levels": 2, "radix": RADIX, "spines": SPINES}
    return build_fabric(
        scenario_from_data({"name": "bench", "duration": "1us", "topology": topology})
    )


def build_once(fabric: Fabric) -> tuple[float, float, float, float, int]:
    """Wall and CPU seconds of the tables, then of the routes, and the number of routes."""
    gpus = fabric.gpus
    wall, cpu = time.perf_counter(), time.process_time()
    router = Router(fabric)
    for dst in gpus:
        router.tables.count(gpus[0], dst)
    tables_wall, tables_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    for src, dst in permutations(gpus, 2):
        router.selector(src, dst)
    routes_wall, routes_cpu = time.perf_counter() - wall, time.process_time() - cpu
    return tables_wall, tables_cpu, routes_wall, routes_cpu, len(router.routes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"two-level fat tree, radix {RADIX}, {SPINES} spines; best of {args.repeats}")
    print(
        f"{'GPUs':>5} {'nodes':>6} {'tables s':>9} {'(cpu)':>7} {'routes':>9} "
        f"{'routes s':>9} {'(cpu)':>7} {'routes/s':>10}"
    )
    for gpus in args.gpus:
        fabric = fat_tree(gpus)
        runs = [build_once(fabric) for _ in range(args.repeats)]
        tables_wall = min(r[0] for r in runs)
        tables_cpu = min(r[1] for r in runs)
        routes_wall = min(r[2] for r in runs)
        routes_cpu = min(r[3] for r in runs)
        routes = runs[0][4]
        print(
            f"{gpus:>5} {fabric.graph.number_of_nodes():>6} {tables_wall:>9.3f} "
            f"{tables_cpu:>7.3f} {routes:>9} {routes_wall:>9.3f} {routes_cpu:>7.3f} "
            f"{routes / routes_wall:>10.0f}"
        )


if __name__ == "__main__":
    main()

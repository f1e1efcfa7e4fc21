"""PHY benchmarks: PRBS31 generation, and link training of whole fabrics.

Run as ``python benchmarks/bench_phy.py [--vector-bits N ...] [--star-links N] [--json PATH]``.
PRBS31: the vectorised generator at each size against a plain Python LFSR, timed in the
same run on the same machine, so the ratio is meaningful even where absolute numbers are
not. Training: every link of the shipped 8-GPU fat tree from reset to L0 (signal-level EQ,
CDR and PRBS checks included, the cache of shared computations emptied first);
``--star-links N`` also trains N links of one switch. Each figure is the best of several
repeats (least disturbed by other load). Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Measure the checkout this script sits in, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sitssim.fabric.topology import build_fabric
from sitssim.phy.links import PhyLink, phy_links
from sitssim.phy.prbs import prbs31
from sitssim.phy.training import group_physics, train_links
from sitssim.scenario import Scenario, load_scenario, scenario_from_data
from sitssim.stages.phy import phy_section

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import target, verdict

TARGET_GBITPS = 1.0
TARGET_RATIO = 100.0
TARGET_TRAIN_S = 2.0
FAT_TREE = Path(__file__).resolve().parents[1] / "scenarios" / "fat_tree_8gpu.yaml"


def plain_lfsr_prbs31(n_bits: int) -> bytearray:
    """Bit-by-bit Fibonacci LFSR, x^31 + x^28 + 1, all-ones seed: the baseline."""
    state = (1 << 31) - 1
    out = bytearray(n_bits)
    for i in range(n_bits):
        bit = ((state >> 30) ^ (state >> 27)) & 1
        state = ((state << 1) | bit) & 0x7FFFFFFF
        out[i] = bit
    return out


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def star(links: int) -> Scenario:
    """``links`` GPUs on one switch: a fabric of that many links on one channel profile."""
    nodes = [{"id": "s0", "kind": "switch"}] + [
        {"id": f"g{i}", "kind": "gpu"} for i in range(links)
    ]
    edges = [{"a": f"g{i}", "b": "s0"} for i in range(links)]
    return scenario_from_data(
        {
            "name": "star",
            "duration": "1us",
            "topology": {"kind": "graph", "nodes": nodes, "edges": edges},
        }
    )


def time_training(scenario: Scenario, repeats: int) -> tuple[float, int, float]:
    """(best wall seconds, links, slowest L0 entry in µs) for a cold reset of every link."""
    links: list[PhyLink] = phy_links(phy_section(scenario), build_fabric(scenario))

    def run() -> float:
        group_physics.cache_clear()
        traces = train_links(links, scenario.seed, lambda link, _t: link.channel)
        return max(t.first_l0_ns for t in traces) / 1e3

    slowest = run()
    return best_seconds(run, repeats), len(links), slowest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--vector-bits",
        type=int,
        nargs="+",
        default=[1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28],
        help="sizes",
    )
    parser.add_argument("--plain-bits", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--star-links", type=int, default=0, help="also train N links")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)

    check = min(*args.vector_bits, args.plain_bits)
    if not np.array_equal(prbs31(check), np.frombuffer(plain_lfsr_prbs31(check), np.uint8)):
        raise SystemExit("the two generators disagree; timings would be meaningless")

    plain_s = best_seconds(lambda: plain_lfsr_prbs31(args.plain_bits), args.repeats)
    plain_gbps = args.plain_bits / plain_s / 1e9
    print(f"PRBS31 plain LFSR : {plain_gbps:8.5f} Gbit/s  ({args.plain_bits:,} bits)")
    targets = []
    for bits in args.vector_bits:
        vector_s = best_seconds(lambda bits=bits: prbs31(bits), args.repeats)
        vector_gbps = bits / vector_s / 1e9
        ratio = vector_gbps / plain_gbps
        size = f"2^{bits.bit_length() - 1}" if bits & (bits - 1) == 0 else f"{bits:,}"
        targets.append(target(f"PRBS31 at {size} bits", vector_gbps, ">=", TARGET_GBITPS, "Gbit/s"))
        targets.append(
            target(f"PRBS31 at {size} bits against the plain LFSR", ratio, ">=", TARGET_RATIO, "x")
        )
        print(
            f"PRBS31 vectorised : {vector_gbps:8.3f} Gbit/s  ({bits:,} bits), {ratio:8.0f} x "
            f"[{verdict(targets[-2]['met'])} >= {TARGET_GBITPS:g} Gbit/s, "
            f"{verdict(targets[-1]['met'])} >= {TARGET_RATIO:g} x]"
        )

    train_s, n_links, slowest_us = time_training(load_scenario(FAT_TREE), args.repeats)
    targets.append(
        target(f"training fat_tree_8gpu ({n_links} links)", train_s, "<", TARGET_TRAIN_S, "s")
    )
    print(
        f"training fat_tree_8gpu: {train_s:8.3f} s wall for {n_links} links "
        f"(last in L0 at {slowest_us:.1f} µs simulated); target < {TARGET_TRAIN_S:g} s "
        f"[{verdict(targets[-1]['met'])}]"
    )
    if args.star_links:
        big_s, n_big, big_us = time_training(star(args.star_links), 1)
        targets.append(target(f"training a {n_big}-link star", big_s, "<", TARGET_TRAIN_S, "s"))
        targets.append(
            target(f"training per link ({n_big}-link star)", 1e3 * big_s / n_big, None, None, "ms")
        )
        print(
            f"training a {n_big}-link star: {big_s:8.3f} s wall "
            f"(last in L0 at {big_us:.1f} µs simulated), {1e3 * big_s / n_big:.2f} ms per link "
            f"[{verdict(targets[-2]['met'])} < {TARGET_TRAIN_S:g} s]"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"targets": targets}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

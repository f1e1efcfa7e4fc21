"""PRBS31 generation throughput: the vectorised generator against a plain Python LFSR.

Run as ``python benchmarks/bench_phy.py``. Both generators are timed in the same run on
the same machine, so the ratio is meaningful even where absolute numbers are not.
Each figure is the best of several repeats (least disturbed by other load). Not a test:
nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# Measure the checkout this script sits in, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sitssim.phy.prbs import prbs31

TARGET_GBITPS = 1.0
TARGET_RATIO = 100.0


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vector-bits", type=int, default=1 << 27)
    parser.add_argument("--plain-bits", type=int, default=1 << 20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    check = min(args.vector_bits, args.plain_bits)
    if not np.array_equal(prbs31(check), np.frombuffer(plain_lfsr_prbs31(check), np.uint8)):
        raise SystemExit("the two generators disagree; timings would be meaningless")

    vector_s = best_seconds(lambda: prbs31(args.vector_bits), args.repeats)
    plain_s = best_seconds(lambda: plain_lfsr_prbs31(args.plain_bits), args.repeats)
    vector_gbps = args.vector_bits / vector_s / 1e9
    plain_gbps = args.plain_bits / plain_s / 1e9
    ratio = vector_gbps / plain_gbps

    print(f"PRBS31 vectorised : {vector_gbps:8.3f} Gbit/s  ({args.vector_bits:,} bits)")
    print(f"PRBS31 plain LFSR : {plain_gbps:8.5f} Gbit/s  ({args.plain_bits:,} bits)")
    print(f"ratio             : {ratio:8.0f} x")
    print(
        f"targets           : >= {TARGET_GBITPS:g} Gbit/s "
        f"[{'met' if vector_gbps >= TARGET_GBITPS else 'MISSED'}], "
        f">= {TARGET_RATIO:g}x [{'met' if ratio >= TARGET_RATIO else 'MISSED'}]"
    )


if __name__ == "__main__":
    main()

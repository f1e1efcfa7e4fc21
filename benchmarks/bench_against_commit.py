"""The transport against an earlier commit's: is this checkout's hot path as fast as it was?

Run as ``python benchmarks/bench_against_commit.py COMMIT [--pairs 5] [--messages N]``.

The earlier commit is checked out into a temporary git worktree (removed afterwards), and
``benchmarks/bench_transport.py`` runs in each tree in turn, one repetition per process,
``--pairs`` times, alternating which tree goes first so that a slow spell of the shared
machine hits both alike. Each run reports the CPU time of the simulation alone (the
schedule, routes and interpreter start are outside it). The figure is the median over pairs
of old CPU time / new CPU time: 1.0 means as fast, 0.95 means this checkout's transport is
5 % slower. Both trees replay the same seeded workload; a pair whose mean latencies differ
is reported, since a speed-up that computes something else would mean nothing. Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(tree: Path, messages: int, out: Path) -> tuple[float, float]:
    """CPU seconds of one sitssim transport run in ``tree``, and its mean latency."""
    subprocess.run(
        [
            sys.executable,
            str(tree / "benchmarks" / "bench_transport.py"),
            "--repeats",
            "1",
            "--messages",
            str(messages),
            "--json",
            str(out),
        ],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    figures = json.loads(out.read_text())
    return figures["samples"]["sitssim_cpu_s"][0], figures["sitssim_mean_latency_ns"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the earlier commit to compare with")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs of runs")
    parser.add_argument("--messages", type=int, default=100_000, help="messages injected")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be >= 1")
    with tempfile.TemporaryDirectory(prefix="sitssim-bench-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            ratios = []
            for pair in range(args.pairs):
                order = [("new", ROOT), ("old", old)]
                if pair % 2:
                    order.reverse()
                cpu, latency = {}, {}
                for name, tree in order:
                    cpu[name], latency[name] = run_once(tree, args.messages, Path(tmp) / "b.json")
                ratios.append(cpu["old"] / cpu["new"])
                same = "" if latency["old"] == latency["new"] else "  LATENCIES DIFFER"
                print(
                    f"pair {pair + 1}: new {cpu['new']:.3f} s, old {cpu['old']:.3f} s CPU, "
                    f"old/new {ratios[-1]:.3f}{same}"
                )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False
            )
    print(f"median old/new CPU time over {args.pairs} pairs: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

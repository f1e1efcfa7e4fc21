"""Sweep speed-up: a study of 16 points on the local pool against ``--workers 1``.

Run as ``python benchmarks/bench_sweep.py [--workers 2] [--duration 3ms] [--json PATH]``.

The study is ``scenarios/fat_tree_8gpu.yaml`` at eight loads (0.1 to 0.8) times two
replications, run twice in this one process: once with one worker (the points run here,
one after another) and once with ``--workers`` processes. Each pays what it would pay
from the command line: the serial sweep its first run's one-off costs (the CDC stage's
per-profile FIFO bisection, cached per process), each pool worker its imports and those
same costs again, in parallel. Both keep their points in a fresh folder, without
figures. The figure is the wall-time ratio, serial over pooled, from this one run
(target >= 1.7 on 2 cores); the two must give the same rows but for wall time.

A worker's start is paid in parallel but not shared: its imports (about 1.1 s) and the
first run's one-off work (about 0.7 s), so the ratio depends on the points' size. The
default, 3 ms of traffic, makes a point of about 5 s, as the points of a study worth a
pool take (the tenants study's do): 1.77 measured on 2 cores. At 1 ms, points of about
1.6 s, it was 1.58 to 1.69; on a machine twice as slow, where 1 ms made 5 s points, 1.76.
Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sitssim.sweeps.run import sweep  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import target, verdict  # noqa: E402

TARGET = 1.7
STUDY = """\
base: {base}
parameters:
  duration: [{duration}]
  workloads.0.load: {{from: 0.1, to: 0.8, step: 0.1}}
replications: 2
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pool processes")
    parser.add_argument("--duration", default="3ms", help="traffic per point")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sitssim-bench-sweep-") as tmp:
        folder = Path(tmp)
        study = folder / "study.yaml"
        base = ROOT / "scenarios" / "fat_tree_8gpu.yaml"
        study.write_text(STUDY.format(base=base, duration=args.duration), encoding="utf-8")
        timings = {}
        frames = {}
        for workers in (1, args.workers):
            start = time.perf_counter()
            frames[workers] = sweep(study, folder / f"w{workers}", workers=workers, figures=False)
            timings[workers] = time.perf_counter() - start
            points = len(frames[workers])
            print(f"--workers {workers}: {points} points in {timings[workers]:.1f} s wall")
    columns = [c for c in frames[1].columns if c != "wall_s"]
    if not frames[1][columns].equals(frames[args.workers][columns]):
        raise SystemExit("the pooled sweep gave other rows than the serial one")
    ratio = timings[1] / timings[args.workers]
    speed_up = target(
        f"{points}-point sweep, --workers {args.workers} over --workers 1", ratio, ">=", TARGET, "x"
    )
    print(
        f"speed-up of --workers {args.workers} over --workers 1: {ratio:.2f} "
        f"(target >= {TARGET:g}) [{verdict(speed_up['met'])}]"
    )
    if args.json is not None:
        figures = {"wall_s": timings, "ratio": ratio, "targets": [speed_up]}
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The shipped all-reduce sweeps to 2 GiB, run as a user runs them, against bare SimPy.

Run as ``python benchmarks/bench_calibration_sweep.py [--scenario hgx_h100 ...] [--json PATH]``.

Each scenario (``scenarios/hgx_h100.yaml`` and ``scenarios/hgx_a100.yaml`` by default: an
nccl-tests-style all-reduce sweep from 8 B to 2 GiB by factors of 2) is run through
``python -m sitssim run SCENARIO --out DIR`` in a process of its own, so the figure is what
a user waits for, imports, tables and figures included; the peak resident memory is that
process's. In the same run, bare SimPy (one process yielding ``env.timeout(1)``) is timed
for one million timeouts, and each sweep's wall time is also given in those units, which
compare between machines where seconds do not. **Target** (the collectives issue): the
H100 sweep under 60 s on a 2-core machine of this class. The test suite runs the sweeps
only to 128 MiB (``tests/shipped_examples.py``). Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simpy

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = {"hgx_h100": 60.0}
BARE_TIMEOUTS = 1_000_000


def bare_simpy_s(timeouts: int = BARE_TIMEOUTS) -> float:
    """Wall time of ``timeouts`` bare SimPy timeouts in one process."""
    env = simpy.Environment()

    def ticker(env: simpy.Environment):
        for _ in range(timeouts):
            yield env.timeout(1)

    env.process(ticker(env))
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def run_sweep(scenario: Path, out: Path) -> tuple[float, float]:
    """Wall seconds and peak resident MB of ``sitssim run scenario`` in a child process."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "sitssim", "run", str(scenario), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    stderr = child.stderr.read() if child.stderr else b""
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{scenario.name}: exit {child.returncode}\n{stderr.decode()}")
    return wall, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", help="a scenario name in scenarios/")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    names = args.scenario or ["hgx_h100", "hgx_a100"]
    bare = bare_simpy_s()
    print(f"bare SimPy: {BARE_TIMEOUTS / bare / 1e6:.2f} M timeouts/s")
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="sitssim-bench-calibration-") as tmp:
        for name in names:
            wall, peak_mb = run_sweep(ROOT / "scenarios" / f"{name}.yaml", Path(tmp) / name)
            figures[name] = {"wall_s": wall, "peak_rss_mb": peak_mb, "in_bare_s": wall / bare}
            target = TARGET_S.get(name)
            verdict = ""
            if target is not None:
                verdict = f" (target < {target:g} s) [{'met' if wall < target else 'MISSED'}]"
            print(
                f"{name}: {wall:.1f} s wall, {peak_mb:.0f} MB peak, "
                f"{wall / bare:.0f} x the time of 1 M bare SimPy timeouts{verdict}"
            )
    if args.json is not None:
        payload = {"bare_simpy_timeouts_per_s": BARE_TIMEOUTS / bare, "sweeps": figures}
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The resource estimate against measured peak memory, scenario by scenario.

Run as ``python benchmarks/bench_memory_estimate.py [SCENARIO ...]`` (default: every
``scenarios/*.yaml`` and ``scenarios/violations/*.yaml``). Each scenario runs in its own
``sitssim run SCENARIO --out TMP --no-figures`` subprocess; its peak RSS is that child's
``ru_maxrss`` (``resource.getrusage(RUSAGE_CHILDREN)`` is a running maximum over all
children, so each run gets a fresh measuring process). The estimate is
``sitssim.preflight.preflight``'s. Prints estimate, measured peak, their ratio, and the
estimated against the delivered message count, and how long the estimate took against the
rest of the pre-run checks (loading, building the fabric, every check: the estimate must never
cost more than the validation it is part of); exits 1 if any memory ratio lies outside
[0.5, 2] or any estimate outlasts its validation. Not a test: it runs every shipped scenario
in full (minutes).
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

# Measure the checkout this script sits in, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sitssim.preflight as preflight_module
from sitssim.estimate import Estimate
from sitssim.preflight import preflight
from sitssim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]

LOW, HIGH = 0.5, 2.0

# One child per measurement: ru_maxrss of RUSAGE_CHILDREN would otherwise keep the largest
# earlier run's peak.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.call([sys.executable, "-m", "sitssim", "run", *sys.argv[1:]])
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def measure(path: Path) -> tuple[int, float, int | None]:
    """Exit code, peak RSS (bytes) and delivered messages of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        env = {**os.environ, "MPLBACKEND": "Agg"}
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path), "--out", str(out), "--no-figures"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        code, peak = proc.stdout.split()[-2:]
        report = out / "report.json"
        messages = (
            json.loads(report.read_text())["metrics"]["messages"] if report.exists() else None
        )
        return int(code), float(peak), messages


def timed_preflight(path: Path) -> tuple[Estimate, float]:
    """The estimate, and its time as a share of the validation's without it (same run)."""
    spent = []
    inner = preflight_module.estimate

    def timed(*args: object) -> Estimate:
        start = time.perf_counter()
        result = inner(*args)
        spent.append(time.perf_counter() - start)
        return result

    preflight_module.estimate = timed
    try:
        start = time.perf_counter()
        est = preflight(load_scenario(path)).estimate
        total = time.perf_counter() - start
    finally:
        preflight_module.estimate = inner
    return est, spent[0] / (total - spent[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.scenarios or sorted(ROOT.glob("scenarios/*.yaml")) + sorted(
        ROOT.glob("scenarios/violations/*.yaml")
    )
    print(
        f"{'scenario':40} {'est MB':>8} {'peak MB':>8} {'ratio':>6} {'est msgs':>9} {'msgs':>8}"
        f" {'estimate / validation time':>27}"
    )
    bad = []
    for path in paths:
        est, share = timed_preflight(path)
        code, peak, messages = measure(path)
        ratio = est.memory_bytes / peak
        if not LOW <= ratio <= HIGH or code not in (0, 1) or share >= 1:
            bad.append(path.name)
        print(
            f"{path.name:40} {est.memory_bytes / 1e6:8.0f} {peak / 1e6:8.0f} {ratio:6.2f} "
            f"{est.messages:9.0f} {messages if messages is not None else '-':>8} {share:27.3f}"
        )
    if bad:
        print(f"outside [{LOW}, {HIGH}] or not run: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

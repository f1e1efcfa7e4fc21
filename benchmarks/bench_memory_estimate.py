"""The resource estimate against measured peak memory, scenario by scenario.

Run as ``python benchmarks/bench_memory_estimate.py [SCENARIO ...]`` (default: every
``scenarios/*.yaml``, ``scenarios/violations/*.yaml`` and ``scenarios/scale/*.yaml``);
``--fidelity flow`` runs and estimates each at flow level instead of its own fidelity. Each
scenario runs in its own ``sitssim run SCENARIO --out TMP --no-figures`` subprocess; its
peak RSS is that child's ``ru_maxrss`` (``resource.getrusage(RUSAGE_CHILDREN)`` is a
running maximum over all children, so each run gets a fresh measuring process). The estimate is
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import target

ROOT = Path(__file__).resolve().parents[1]

LOW, HIGH = 0.5, 2.0

# One child per measurement: ru_maxrss of RUSAGE_CHILDREN would otherwise keep the largest
# earlier run's peak.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.call([sys.executable, "-m", "sitssim", "run", *sys.argv[1:]])
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def measure(path: Path, fidelity: str | None = None) -> tuple[int, float, int | None]:
    """Exit code, peak RSS (bytes) and delivered messages of one run."""
    extra = [] if fidelity is None else ["--fidelity", fidelity]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        env = {**os.environ, "MPLBACKEND": "Agg"}
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path), "--out", str(out), "--no-figures", *extra],
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


def timed_preflight(path: Path, fidelity: str | None = None) -> tuple[Estimate, float]:
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
        scenario = load_scenario(path)
        if fidelity is not None:
            scenario = scenario.updated(fidelity=fidelity)
        est = preflight(scenario).estimate
        total = time.perf_counter() - start
    finally:
        preflight_module.estimate = inner
    return est, spent[0] / (total - spent[0])


def _shown(path: Path) -> str:
    """The scenario's path from the repository root where it lies inside it."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(full)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--fidelity", choices=("packet", "flow"), default=None)
    args = parser.parse_args(argv)
    paths = args.scenarios or [
        p
        for folder in ("", "violations/", "scale/")
        for p in sorted(ROOT.glob(f"scenarios/{folder}*.yaml"))
    ]
    print(
        f"{'scenario':40} {'est MB':>8} {'peak MB':>8} {'ratio':>6} {'est msgs':>9} {'msgs':>8}"
        f" {'estimate / validation time':>27}"
    )
    bad = []
    rows = []
    for path in paths:
        est, share = timed_preflight(path, args.fidelity)
        start = time.perf_counter()
        code, peak, messages = measure(path, args.fidelity)
        wall = time.perf_counter() - start
        ratio = est.memory_bytes / peak
        rows.append(
            {
                "scenario": _shown(path),
                "exit_code": code,
                "wall_s": wall,
                "peak_bytes": peak,
                "estimate_bytes": est.memory_bytes,
                "estimate_over_peak": ratio,
                "estimate_over_validation_time": share,
            }
        )
        if not LOW <= ratio <= HIGH or code not in (0, 1) or share >= 1:
            bad.append(path.name)
        print(
            f"{path.name:40} {est.memory_bytes / 1e6:8.0f} {peak / 1e6:8.0f} {ratio:6.2f} "
            f"{est.messages:9.0f} {messages if messages is not None else '-':>8} {share:27.3f}"
        )
    if args.json is not None:
        ratios = [r["estimate_over_peak"] for r in rows]
        figures = {
            "rows": rows,
            "targets": [
                target("lowest memory estimate / measured peak", min(ratios), ">=", LOW, "x"),
                target("highest memory estimate / measured peak", max(ratios), "<=", HIGH, "x"),
                target(
                    "slowest memory estimate / the rest of its validation",
                    max(r["estimate_over_validation_time"] for r in rows),
                    "<",
                    1.0,
                    "x",
                ),
                target(
                    "slowest shipped scenario, sitssim run end to end",
                    max(r["wall_s"] for r in rows),
                    None,
                    None,
                    "s",
                ),
                target(
                    "largest peak memory of a shipped scenario",
                    max(r["peak_bytes"] for r in rows) / 2**30,
                    None,
                    None,
                    "GiB",
                ),
            ],
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if bad:
        print(
            f"memory estimate outside [{LOW}, {HIGH}], not run, or slower than the rest of "
            f"its validation: {', '.join(bad)}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

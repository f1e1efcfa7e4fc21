"""``python -m benchmarks``: run the benchmark suite, write its figures and their table.

Run from the repository root as ``python -m benchmarks [--only NAME ...] [--quick]
[--out benchmarks/results.json] [--docs docs/performance.md]``.

Each benchmark runs as its own script in its own process (a fresh interpreter: no
benchmark pays for another's imports, caches or garbage), with ``--json``; every figure it
reports comes with its target (``targets.py``), and each ratio is against a baseline
measured in that same process, so the figures compare between machines where absolute
rates do not. The suite writes every benchmark's figures to ``--out`` with the machine
they ran on, and rewrites the table between the markers of ``--docs``. ``--quick`` runs
each benchmark at a toy size: it checks that the suite works end to end, and its figures
mean nothing. Exit 0 when every benchmark ran and its own checks held (a missed target
is a finding, not a failure: nothing here asserts on time), 1 when one did not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"
PACKAGES = ("numpy", "scipy", "simpy", "pandas", "networkx", "pyarrow")


@dataclass(frozen=True)
class Benchmark:
    """A script of this folder, the arguments the suite gives it, and its toy arguments."""

    name: str
    script: str
    what: str
    argv: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()


SUITE = (
    Benchmark(
        "transport",
        "bench_transport.py",
        "transport against the naive model, bare SimPy and a bare heapq loop",
        quick=("--messages", "300", "--repeats", "1"),
    ),
    Benchmark(
        "link_layer",
        "bench_link_layer.py",
        "transport with flits, replays and credits on every link",
        quick=("--messages", "300", "--repeats", "1"),
    ),
    Benchmark(
        "switch",
        "bench_switch.py",
        "transport with input-queued switches",
        quick=("--messages", "300", "--pairs", "1"),
    ),
    Benchmark(
        "phy",
        "bench_phy.py",
        "PRBS31 against a plain LFSR at 2^20 to 2^28 bits, link training",
        argv=("--star-links", "1000"),
        quick=("--vector-bits", "65536", "--plain-bits", "4096", "--repeats", "1"),
    ),
    Benchmark(
        "scale",
        "bench_scale.py",
        "cost per hop-event from 128 to 1024 GPUs",
        argv=("--repeats", "3"),
        quick=("--gpus", "64", "128", "--duration", "1us"),
    ),
    Benchmark(
        "sweep",
        "bench_sweep.py",
        "a 16-point sweep on two workers against one",
        quick=("--duration", "1us"),
    ),
    Benchmark(
        "fidelity",
        "bench_fidelity.py",
        "flow-level against packet-level runs: speed and completion-time error",
        quick=("scenarios/direct_rc_4gpu.yaml", "--duration", "2us"),
    ),
    Benchmark(
        "scenarios",
        "bench_memory_estimate.py",
        "wall time, peak memory and memory estimate of every shipped scenario",
        quick=("scenarios/direct_rc_4gpu.yaml",),
    ),
)
NAMES = tuple(b.name for b in SUITE)


def machine() -> dict[str, Any]:
    """What the figures ran on: they are ratios, but a reader compares machines too."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "packages": {name: version(name) for name in PACKAGES},
    }
    for key, path, field in (
        ("cpu_model", "/proc/cpuinfo", "model name"),
        ("memory", "/proc/meminfo", "MemTotal"),
    ):
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        info[key] = next(
            (ln.split(":", 1)[1].strip() for ln in lines if ln.startswith(field)), None
        )
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    info["commit"] = commit.stdout.strip() if commit.returncode == 0 else None
    return info


def run(bench: Benchmark, quick: bool) -> dict[str, Any]:
    """Run one benchmark in a process of its own; its figures, output and wall time."""
    argv = bench.quick if quick else bench.argv
    with tempfile.TemporaryDirectory(prefix="sitssim-bench-") as tmp:
        figures_path = Path(tmp) / "figures.json"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(HERE / bench.script), *argv, "--json", str(figures_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "MPLBACKEND": "Agg"},
            check=False,
        )
        wall = time.perf_counter() - start
        figures = json.loads(figures_path.read_text()) if figures_path.exists() else None
    result: dict[str, Any] = {
        "script": bench.script,
        "what": bench.what,
        "argv": list(argv),
        "exit_code": proc.returncode,
        "wall_s": wall,
        "output": proc.stdout,
    }
    # A benchmark exits non-zero when a check of its own fails (the models disagree, an
    # estimate is out of bounds); what figures it wrote are kept beside the failure.
    result["targets"] = []
    if figures is not None:
        result["targets"] = figures.pop("targets")
        result["figures"] = figures
    if proc.returncode != 0 or figures is None:
        said = proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines()
        result["error"] = said[-1] if said else "no figures written"
    return result


def _number(value: float, unit: str) -> str:
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}".strip()


def table(results: dict[str, Any]) -> str:
    """The markdown table of every figure, as ``docs/performance.md`` shows it."""
    ran = results["machine"]
    lines = [
        f"Measured {results['finished']} on {ran.get('cpu_model') or ran['platform']} "
        f"({ran['cpus']} cores, Python {ran['python']}, commit "
        f"{(ran.get('commit') or 'unknown')[:10]}){' in quick mode' if results['quick'] else ''}.",
        "",
        "| benchmark | figure | measured | target | |",
        "|---|---|---|---|---|",
    ]
    for name, bench in results["benchmarks"].items():
        if "error" in bench:
            lines.append(
                f"| {name} | failed (exit {bench['exit_code']}): {bench['error']} | | | ✗ |"
            )
        for t in bench["targets"]:
            limit = "" if t["op"] is None else f"{t['op']} {_number(t['limit'], t['unit'])}"
            mark = {True: "met", False: "**missed**", None: ""}[t["met"]]
            lines.append(
                f"| {name} | {t['figure']} | {_number(t['value'], t['unit'])} | {limit} | {mark} |"
            )
    return "\n".join(lines)


def write_docs(path: Path, text: str) -> None:
    """Replace the table between the markers of ``path``, leaving the rest as it is."""
    doc = path.read_text(encoding="utf-8")
    begin, end = doc.find(BEGIN), doc.find(END)
    if begin < 0 or end < begin:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} section to write the table into")
    path.write_text(doc[: begin + len(BEGIN)] + "\n" + text + "\n" + doc[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--only", nargs="+", choices=NAMES, help="these benchmarks only")
    parser.add_argument("--quick", action="store_true", help="toy sizes: check the suite runs")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args(argv)
    chosen = [b for b in SUITE if args.only is None or b.name in args.only]
    results: dict[str, Any] = {"quick": args.quick, "machine": machine(), "benchmarks": {}}
    failed = []
    for bench in chosen:
        print(f"== {bench.name}: {bench.what}", flush=True)
        result = run(bench, args.quick)
        print(result["output"], end="", flush=True)
        if "error" in result:
            failed.append(bench.name)
            print(f"{bench.name} failed (exit {result['exit_code']}): {result['error']}")
        results["benchmarks"][bench.name] = result
    results["finished"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    text = table(results)
    write_docs(args.docs, text)
    print(f"\n{text}\n\nfigures in {args.out}, table in {args.docs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Flow-level against packet-level runs: wall time and completion-time error, per scenario.

Run as ``python benchmarks/bench_fidelity.py [SCENARIO ...] [--duration T] [--json PATH]``.
Each scenario runs at both fidelities in this process (``compare_fidelities``), packet
first; the speed figure is packet wall time over flow wall time (above 1: the fluid run is
faster), reported beside the errors on mean and p99 completion time that
``docs/performance.md`` ("Flow-level mode") explains. No target: the flow-level mode's
speed is a finding (it is faster where few flows meet and slower where many share one
part of the fabric), and its accuracy is checked by ``tests/studies/test_fidelity.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sitssim.scenario import load_scenario  # noqa: E402
from sitssim.studies.fidelity import compare_fidelities  # noqa: E402
from sitssim.units import parse_time_ns  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import target  # noqa: E402

DEFAULT = (
    "scenarios/nvswitch_8gpu.yaml",
    "scenarios/direct_rc_4gpu.yaml",
    "scenarios/fat_tree_8gpu.yaml",
    "scenarios/llama3_8b_tp8_nvswitch.yaml",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT))
    parser.add_argument("--duration", default=None, help="override each scenario's duration")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    targets = []
    rows = []
    for path in args.scenarios:
        scenario = load_scenario(ROOT / path)
        if args.duration is not None:
            scenario = scenario.updated(duration=parse_time_ns(args.duration))
        c = compare_fidelities(scenario)
        rows.append({**c.row(), "packet_wall_s": c.packet_wall_s, "flow_wall_s": c.flow_wall_s})
        print(
            f"{c.scenario}: {c.messages} messages; flow against packet: mean "
            f"{c.mean_error:+.1%}, p99 {c.p99_error:+.1%}; speed {c.speedup:.2f}x "
            f"({c.packet_wall_s:.2f} s / {c.flow_wall_s:.2f} s)"
        )
        targets.append(target(f"flow-level speed, {c.scenario}", c.speedup, None, None, "x"))
        targets.append(target(f"flow-level mean error, {c.scenario}", c.mean_error, None, None))
    if args.json is not None:
        figures = {"rows": rows, "targets": targets}
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

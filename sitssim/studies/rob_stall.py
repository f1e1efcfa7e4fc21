"""What-if: reorder-buffer stall time of a direct-RC root complex against its GPU count.

A study runs whole simulations, so it sits above the simulation, never inside the
workload driver it exercises.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate


def rob_stall_study(
    gpu_counts: Sequence[int] = (1, 2, 3, 4, 8),
    seeds: Sequence[int] = (0, 1, 2),
    interval_ns: float = 40.0,
    rob_depth: int = 8,
    duration_ns: float = 20_000.0,
) -> pd.DataFrame:
    """Reorder-buffer stall time of a direct-RC fabric's root complex against its GPU count.

    Every GPU gets the same read load from the root complex (one read per
    ``interval_ns`` on average), so more GPUs mean more outstanding reads
    sharing one reorder buffer. One row per (GPUs, seed): the stall time, its
    fraction of the run, read round trips and the ``fabric.topology_limits``
    verdict (a direct-RC fabric allows at most four GPUs).
    """
    rows = []
    for n in gpu_counts:
        for seed in seeds:
            scenario = scenario_from_data(
                {
                    "name": f"rob_study_{n}",
                    "seed": seed,
                    "duration": f"{duration_ns}ns",
                    "topology": {"kind": "direct_rc", "gpus": n},
                    "workloads": [
                        {
                            "kind": "transactions",
                            "interval": f"{interval_ns}ns",
                            "read_fraction": 1.0,
                            "rob_depth": rob_depth,
                        }
                    ],
                }
            )
            result = simulate(scenario)
            stalls = result.tables["rob_stalls"]
            reads = result.tables["transactions"]
            limits = next(v for v in result.verdicts if v.id == "fabric.topology_limits")
            stall_ns = float(stalls["duration_ns"].sum())
            rows.append(
                {
                    "gpus": n,
                    "seed": seed,
                    "reads": len(reads),
                    "stall_ns": stall_ns,
                    "stall_fraction": stall_ns / result.simulated_ns,
                    "rtt_p50_ns": float(reads["rtt_ns"].median()),
                    "rob_wait_p99_ns": float(reads["rob_wait_ns"].quantile(0.99)),
                    "topology_limits": limits.verdict,
                }
            )
    return pd.DataFrame(rows)

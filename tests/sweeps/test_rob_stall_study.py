"""The reorder-buffer study (``studies/rob_stall_direct_rc.yaml``): more GPUs at the same
per-GPU read load share one root complex's reorder buffer, which stalls longer."""

from __future__ import annotations

from pathlib import Path

import sitssim

ROOT = Path(__file__).resolve().parents[2]
M = "metrics.transactions.host_reads."


def test_rob_stalls_grow_with_gpu_count_in_a_direct_rc_fabric(tmp_path: Path) -> None:
    study = sitssim.load_study(ROOT / "studies" / "rob_stall_direct_rc.yaml")
    assert study.replications == 3
    quick = study.restricted(replications=2, keep={"topology.gpus": [1, 4, 8]})
    rows = sitssim.sweep(quick, tmp_path / "out", workers=1, figures=False)
    assert (rows["status"] == "ok").all() and len(rows) == 6
    by = rows.groupby("topology.gpus")
    stall = by[M + "rob_stall_ns"].mean()
    assert stall[1] <= stall[4] < stall[8]
    assert (rows[M + "rob_stall_fraction"] < 1).all()
    # The same load per GPU: requests grow with the GPUs, each GPU's about the same.
    per_gpu = by[M + "requests"].mean() / stall.index.to_numpy()
    assert per_gpu.max() < 1.2 * per_gpu.min()
    # The stalls delay issue, not completion: every read completes, and more GPUs' reads
    # take no less time for it.
    assert (rows[M + "reads_completed"] == rows[M + "requests"]).all()
    rtt = by[M + "read_rtt_ns.p50"].mean()
    assert rtt[1] <= rtt[8]
    limits = rows.set_index("topology.gpus")["clauses.fabric.topology_limits.verdict"]
    assert (limits[[1, 4]] == "pass").all() and (limits[8] == "fail").all()

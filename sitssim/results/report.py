"""Writing a run's results: report.json, run_info.json, parquet tables, figures.

report.json holds only what the scenario and seed determine, so the same
scenario and seed give the same bytes; wall-clock time and host details go to
run_info.json. Everything is written into a staging folder beside the
destination and swapped into place (``sitssim.results.outdir``), so a failed or
interrupted run leaves nothing partial and earlier results whole.
"""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path
from typing import Any

import numpy as np

from sitssim import __version__
from sitssim.results.outdir import ResultsFolder
from sitssim.simulation import RunResult


def _clean(value: Any) -> Any:
    """JSON-safe, deterministic values: numpy scalars to Python, NaN/inf to null."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_dict(result: RunResult) -> dict[str, Any]:
    scenario = result.scenario
    counts = {k: sum(v.verdict == k for v in result.verdicts) for k in ("pass", "fail", "n/a")}
    named: dict[str, Any] = {"name": scenario.name, "sha256": scenario.source.sha256}
    # Only a flow-level run says so: ``--fidelity flow`` runs a file whose hash is the
    # packet-level run's, and every packet-level report stays as it was.
    if scenario.fidelity != "packet":
        named["fidelity"] = scenario.fidelity
    return _clean(
        {
            "sitssim": __version__,
            "scenario": named,
            "seed": result.seed,
            "simulated_ns": result.simulated_ns,
            "summary": counts,
            "clauses": [v.to_dict() for v in result.verdicts],
            "metrics": result.metrics,
        }
    )


def report_json(result: RunResult) -> str:
    return json.dumps(report_dict(result), indent=2, allow_nan=False) + "\n"


def write_results(result: RunResult, out: Path, wall_s: float, figures: bool = True) -> None:
    """Write every output to ``out``, replacing earlier sitssim results there atomically."""
    with ResultsFolder(out) as folder:
        write_outputs(result, folder.stage(), wall_s, figures=figures)
        folder.commit()


def write_outputs(result: RunResult, folder: Path, wall_s: float, figures: bool = True) -> None:
    """Write every output into ``folder``, a staging folder that is renamed into place after."""
    from sitssim.results.phy_plots import write_phy_figures
    from sitssim.results.plots import write_figures
    from sitssim.results.trace import write_trace
    from sitssim.results.vcd import write_vcd

    (folder / "report.json").write_text(report_json(result), encoding="utf-8")
    info = {
        "wall_s": wall_s,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "scenario_path": result.scenario.source.path,
        "messages_per_s": result.metrics["messages"] / wall_s if wall_s > 0 else None,
        "phase_wall_s": result.phase_wall_s,
    }
    (folder / "run_info.json").write_text(json.dumps(_clean(info), indent=2) + "\n")
    for name, table in result.tables.items():
        table.to_parquet(folder / f"{name}.parquet", index=False)
    write_trace(result.tables, folder / "trace.json")
    phy = result.metrics.get("phy") or {}
    traffic_start_ns = phy.get("traffic_start_ns") or 0.0
    write_vcd(result.tables, folder / "waves.vcd", traffic_start_ns)
    if figures:
        write_figures(result, folder / "figures")
        write_phy_figures(
            result.tables,
            result.scenario.name,
            folder / "figures",
            end_ns=traffic_start_ns + result.metrics["simulated_ns"],
        )

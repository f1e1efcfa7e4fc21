"""Writing a run's results: report.json, run_info.json, parquet tables, figures.

report.json holds only what the scenario and seed determine, so the same
scenario and seed give the same bytes; wall-clock time and host details go to
run_info.json. Everything is written into a temporary folder beside the
destination and renamed into place, so a failed run leaves nothing partial.
"""

from __future__ import annotations

import json
import math
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sitssim import __version__
from sitssim.errors import InputError
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
    return _clean(
        {
            "sitssim": __version__,
            "scenario": {"name": scenario.name, "sha256": scenario.source.sha256},
            "seed": result.seed,
            "simulated_ns": result.simulated_ns,
            "summary": counts,
            "clauses": [v.to_dict() for v in result.verdicts],
            "metrics": result.metrics,
        }
    )


def report_json(result: RunResult) -> str:
    return json.dumps(report_dict(result), indent=2, allow_nan=False) + "\n"


def check_writable(out: Path) -> None:
    """Fail early, as bad input, if ``out`` could not be created or replaced.

    Nothing is created here: the check writes a probe into the nearest folder
    that exists, so a run rejected later leaves no trace.
    """
    where = str(out)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a directory", file=where, field="--out")
    probe = out.resolve().parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"{probe} is a file, not a directory", file=where, field="--out")
    try:
        with tempfile.TemporaryDirectory(dir=probe, prefix=".sitssim-probe-"):
            pass
    except OSError as exc:
        raise InputError(
            f"cannot write to {probe}: {exc.strerror}", file=where, field="--out"
        ) from None


def write_results(result: RunResult, out: Path, wall_s: float, figures: bool = True) -> None:
    """Write every output into ``out`` atomically (temporary folder, then rename)."""
    from sitssim.results.phy_plots import write_phy_figures
    from sitssim.results.plots import write_figures
    from sitssim.results.trace import write_trace
    from sitssim.results.vcd import write_vcd

    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}-"))
    try:
        (staging / "report.json").write_text(report_json(result), encoding="utf-8")
        info = {
            "wall_s": wall_s,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "scenario_path": result.scenario.source.path,
            "messages_per_s": result.metrics["messages"] / wall_s if wall_s > 0 else None,
        }
        (staging / "run_info.json").write_text(json.dumps(_clean(info), indent=2) + "\n")
        for name, table in result.tables.items():
            table.to_parquet(staging / f"{name}.parquet", index=False)
        write_trace(result.tables, staging / "trace.json")
        phy = result.metrics.get("phy") or {}
        traffic_start_ns = phy.get("traffic_start_ns") or 0.0
        write_vcd(result.tables, staging / "waves.vcd", traffic_start_ns)
        if figures:
            write_figures(result, staging / "figures")
            write_phy_figures(
                result.tables,
                result.scenario.name,
                staging / "figures",
                end_ns=traffic_start_ns + result.metrics["simulated_ns"],
            )
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

"""Shared by the sweep tests (imported as ``sweeps.sweep_helpers``): bases, study files,
rows compared as sets, and a spy on the simulator a sweep calls in this process."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sitssim.sweeps import rows as sweep_rows

ROOT = Path(__file__).resolve().parents[2]
FAT_TREE = ROOT / "scenarios" / "fat_tree_8gpu.yaml"
# No clocks or CDC corners: its first run in a fresh process costs no more than the next,
# which matters where a point runs in a spawned worker or a subprocess.
DIRECT_RC = ROOT / "scenarios" / "direct_rc_4gpu.yaml"
CHAIN_9HOP = ROOT / "scenarios" / "violations" / "chain_9hop.yaml"


# Two short points on DIRECT_RC: what the backend tests send to other processes.
TWO_LOADS_ON_DIRECT_RC = (
    f"base: {DIRECT_RC}\n"
    "parameters:\n"
    "  duration: [2us]\n"
    "  workloads.0.load: [0.2, 0.4]\n"
    "metrics: [delivered_GBps, data_latency_ns.p99, messages]\n"
)


def write_study(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _plain(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def row_set(frame: pd.DataFrame, drop: Iterable[str] = ("wall_s",)) -> set[tuple]:
    """The rows of ``frame`` as a set of tuples over its sorted columns (but ``drop``),
    NaN read as None so that two missing values compare equal."""
    columns = sorted(c for c in frame.columns if c not in set(drop))
    return {
        tuple((c, _plain(v)) for c, v in zip(columns, row, strict=True))
        for row in frame[columns].itertuples(index=False)
    }


def assert_same_rows(got: pd.DataFrame, expected: pd.DataFrame, drop=("wall_s",)) -> None:
    assert sorted(got.columns) == sorted(expected.columns)
    assert len(got) == len(expected)
    assert row_set(got, drop) == row_set(expected, drop)


class Spy:
    """Wraps the ``simulate`` that ``sitssim.sweeps.rows.run_point`` calls: records the
    (first workload's load, seed) of every run; ``fail`` names the runs that raise."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[float, int]] = []
        self.fail: set[tuple[float, int]] = set()
        self._real = sweep_rows.simulate
        monkeypatch.setattr(sweep_rows, "simulate", self)

    def __call__(self, scenario: Any, *args: Any, **kwargs: Any) -> Any:
        run = (scenario.workloads[0].load, scenario.seed)
        self.calls.append(run)
        if run in self.fail:
            raise RuntimeError(f"boom at load {run[0]} seed {run[1]}")
        return self._real(scenario, *args, **kwargs)


def refuse_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any point run in this process becomes an error record (a spawned worker or a Dask
    worker imports the real simulator, so its points are unaffected)."""

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulate ran in the parent process")

    monkeypatch.setattr(sweep_rows, "simulate", boom)


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }

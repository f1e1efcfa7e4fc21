"""The Dask backend: a LocalCluster of two worker processes gives the local backend's rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from sweeps.sweep_helpers import (
    TWO_LOADS_ON_DIRECT_RC,
    assert_same_rows,
    refuse_to_run,
    write_study,
)

import sitssim


def test_a_two_worker_local_cluster_gives_the_local_backends_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_study(tmp_path / "dask.yaml", TWO_LOADS_ON_DIRECT_RC)
    local = sitssim.sweep(path, tmp_path / "local", workers=1, figures=False)
    assert (local["status"] == "ok").all()
    # The cluster's workers are processes of their own: were a point run here, it would fail.
    refuse_to_run(monkeypatch)
    out = tmp_path / "dask"
    on_dask = sitssim.sweep(path, out, workers=2, backend="dask", figures=False)
    assert (on_dask["status"] == "ok").all(), on_dask["error"].tolist()
    assert on_dask["key"].tolist() == local["key"].tolist()
    assert_same_rows(on_dask, local)
    assert_same_rows(pd.read_parquet(out / "points"), local)

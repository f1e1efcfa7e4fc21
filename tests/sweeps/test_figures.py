"""A sweep's figures: which curves each varied parameter's figure draws, on which axis."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sweeps.sweep_helpers import FAT_TREE, write_study

from sitssim.sweeps.figures import _Curves
from sitssim.sweeps.study import load_study

BER = "link_layer.flit.pre_fec_ber"


def study(tmp_path: Path, text: str):
    return load_study(write_study(tmp_path / "study.yaml", f"base: {FAT_TREE}\n{text}"))


def test_a_zip_partner_moves_with_its_parameter_and_draws_no_line_of_its_own(tmp_path):
    zipped = study(
        tmp_path,
        f"zip:\n  - {BER}: [1.0e-8, 1.0e-6, 1.0e-4]\n    duration: [50us, 20us, 10us]\n",
    )
    summary = pd.DataFrame({BER: [1e-8, 1e-6, 1e-4], "duration": ["50us", "20us", "10us"]})
    curves = list(_Curves(summary, zipped, BER))
    assert len(curves) == 1 and list(curves[0][1]) == [0, 1, 2]


def test_another_varied_parameter_draws_a_line_per_value(tmp_path):
    grid = study(tmp_path, "parameters:\n  workloads.0.load: [0.2, 0.4]\n  duration: [5us, 9us]\n")
    summary = pd.DataFrame(
        {"workloads.0.load": [0.2, 0.2, 0.4, 0.4], "duration": ["5us", "9us", "5us", "9us"]}
    )
    labels = [label for label, _ in _Curves(summary, grid, "workloads.0.load")]
    assert labels == ["duration=5us", "duration=9us"]


def test_listed_values_across_three_decades_get_a_log_axis_and_closer_ones_do_not(tmp_path):
    wide = study(tmp_path, f"parameters:\n  {BER}: [1.0e-8, 1.0e-6, 1.0e-5]\n")
    assert _Curves(pd.DataFrame({BER: [1e-8, 1e-6, 1e-5]}), wide, BER).log
    narrow = study(tmp_path, "parameters:\n  workloads.0.load: [0.1, 0.5, 0.9]\n")
    summary = pd.DataFrame({"workloads.0.load": [0.1, 0.5, 0.9]})
    assert not _Curves(summary, narrow, "workloads.0.load").log

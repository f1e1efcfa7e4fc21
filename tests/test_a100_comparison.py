"""The shipped A100 comparison notebook is what its generator builds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]


def test_a100_comparison_notebook_matches_its_generator() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_a100_comparison", ROOT / "notebooks" / "make_a100_comparison.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = nbformat.read(ROOT / "notebooks" / "a100_comparison.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in shipped.cells] == [
        (c.cell_type, c.source) for c in module.build().cells
    ]
    assert all(
        out.output_type != "error"
        for cell in shipped.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )

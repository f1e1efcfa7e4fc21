"""Every notebook in notebooks/ runs top to bottom, and generated ones match their generator.

Notebooks run in a fresh kernel with the repository root as working directory,
so they find the scenarios and data the way a reader's checkout would, and with
``SITSSIM_QUICK=1``: a study notebook shrinks to a few runs and still checks, in its
last cell, the numbers it computed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 120


def test_there_are_notebooks_to_run() -> None:
    assert (ROOT / "notebooks" / "calibration_allreduce.ipynb") in NOTEBOOKS
    assert (ROOT / "notebooks" / "tenants_study.ipynb") in NOTEBOOKS
    for name in CHECKED:
        assert (ROOT / "notebooks" / name) in NOTEBOOKS, name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SITSSIM_QUICK", "1")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.output_type == "error"
    ]
    assert not errors
    if path.name in CHECKED:
        last = [c for c in nb.cells if c.cell_type == "code"][-1]
        assert "checks passed" in "".join(o.get("text", "") for o in last.outputs)


# Study notebooks whose last cell asserts the study's findings on what it computed.
STUDIES = ["load_latency", "channel_loss", "ber_latency", "gpu_count", "tp_degree"]
CHECKED = {
    "a100_comparison.ipynb",
    "tenants_study.ipynb",
    "calibration_allreduce.ipynb",
    *(f"{s}_study.ipynb" for s in STUDIES),
}
GENERATED = [
    "make_calibration.py",
    "make_tenants_study.py",
    *(f"make_{s}_study.py" for s in STUDIES),
]


@pytest.mark.parametrize("generator", GENERATED)
def test_generated_notebook_matches_its_generator(generator: str) -> None:
    spec = importlib.util.spec_from_file_location(
        generator.removesuffix(".py"), ROOT / "notebooks" / generator
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generated = module.build_notebook()
    shipped = nbformat.read(module.NOTEBOOK, as_version=4)
    assert [(c.cell_type, c.source) for c in shipped.cells] == [
        (c.cell_type, c.source) for c in generated.cells
    ]

"""What the notebook generators in notebooks/ share: a Python 3 notebook made of cells, and
the command line that writes it, executed in place from the repository root.

A generator keeps its notebook's code in reviewable Python; the test suite checks that the
shipped notebook's cells are the generator's and executes them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbformat.v4 import new_notebook

ROOT = Path(__file__).resolve().parents[1]


def python_notebook(cells: list[nbformat.NotebookNode]) -> nbformat.NotebookNode:
    """A notebook of ``cells`` for the ``python3`` kernel."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = cells
    return nb


def generate(
    build: Callable[[], nbformat.NotebookNode], path: Path, description: str, timeout: int
) -> None:
    """Write ``build()``'s notebook to ``path``, executed from the repository root (with
    ``--no-execute`` on the command line: without outputs)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--no-execute", action="store_true", help="write without outputs")
    args = parser.parse_args()
    nb = build()
    if not args.no_execute:
        from nbclient import NotebookClient

        NotebookClient(
            nb, timeout=timeout, record_timing=False, resources={"metadata": {"path": str(ROOT)}}
        ).execute()
    nbformat.write(nb, path)


STUDY_SETUP = """\
import os
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "pyproject.toml").exists())
# This checkout's sitssim, even if another copy is installed.
sys.path.insert(0, str(ROOT))
import sitssim  # noqa: E402

# SITSSIM_QUICK=1 (the test suite) shrinks the study to a few runs in this process.
QUICK = os.environ.get("SITSSIM_QUICK") == "1"
WORKERS = 1 if QUICK else os.cpu_count()


def run(name, keep=None):
    \"\"\"Sweep studies/<name>.yaml (in quick mode: one seed, the values in ``keep``).\"\"\"
    study = sitssim.load_study(ROOT / "studies" / f"{name}.yaml")
    if QUICK:
        study = study.restricted(replications=1, keep=keep)
    start = time.perf_counter()
    points = sitssim.sweep(study, workers=WORKERS)
    print(f"{name}: {len(points)} runs in {time.perf_counter() - start:.0f} s on {WORKERS} workers")
    return study, points, sitssim.summarise(points, study)
"""
"""The first code cell of a study notebook: the public API, the quick switch, ``run``."""

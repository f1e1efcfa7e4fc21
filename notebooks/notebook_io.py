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

"""Loading a scenario imports no model: bad input is refused before the heavy imports.

``sitssim validate`` of a billion-laughs file is refused by the loader in milliseconds,
but the process used to take two seconds importing pandas, scipy, networkx and SimPy
first (``sitssim.scenario`` took its config models from the driver modules, and
``sitssim/__init__.py`` imported the whole model). These checks are structural, not
timed: each runs a fresh interpreter and asks which modules it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_yaml_bounds import billion_laughs, first_line_past_the_node_bound

from sitssim.yaml_bounds import MAX_NODES

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "scipy", "networkx", "simpy", "matplotlib")


def heavy_modules_after(statement: str) -> list[str]:
    """The ``HEAVY`` modules a fresh interpreter holds after running ``statement``."""
    probe = (
        f"import json, sys; {statement}; "
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("module", ["sitssim", "sitssim.scenario", "sitssim.cli"])
def test_importing_the_loader_or_the_cli_imports_no_model(module: str) -> None:
    assert heavy_modules_after(f"import {module}") == []


def test_the_public_api_loads_the_model_on_first_use() -> None:
    assert "pandas" in heavy_modules_after("import sitssim; sitssim.simulate")


def test_validate_refuses_a_billion_laughs_with_one_located_line(tmp_path: Path) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(billion_laughs(9), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "sitssim", "validate", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (message,) = done.stderr.strip().splitlines()
    line = first_line_past_the_node_bound(9)
    assert message.startswith(f"error: {path}:{line}: "), message
    assert f"bound: {MAX_NODES}" in message

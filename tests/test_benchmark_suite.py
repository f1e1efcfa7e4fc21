"""``python -m benchmarks`` runs every benchmark, keeps every figure and tables it.

In quick mode (toy sizes): what is checked is the suite's plumbing and the few relations
that hold at any size, never a speed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVERY = {"transport", "link_layer", "switch", "phy", "scale", "sweep", "fidelity", "scenarios"}


@pytest.fixture(scope="module")
def suite_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "benchmarks_main", ROOT / "benchmarks" / "__main__.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _suite(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    docs = tmp_path / "performance.md"
    shutil.copy(ROOT / "docs" / "performance.md", docs)
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--out",
            str(out),
            "--docs",
            str(docs),
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc, out, docs


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    return _suite(tmp_path_factory.mktemp("suite"))


def test_every_benchmark_ran_and_reported_its_figures(quick_run) -> None:
    proc, out, _ = quick_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert set(results["benchmarks"]) == EVERY
    for name, bench in results["benchmarks"].items():
        assert bench["exit_code"] == 0, name
        assert bench["targets"], name
        for t in bench["targets"]:
            assert t["value"] == t["value"], (name, t)  # not NaN
    assert results["quick"] is True
    assert results["machine"]["cpus"] == os.cpu_count()
    assert len(results["machine"]["commit"]) == 40


def test_the_transport_sits_between_the_naive_model_and_a_bare_heapq_loop(quick_run) -> None:
    _, out, _ = quick_run
    figures = json.loads(out.read_text())["benchmarks"]["transport"]["figures"]
    # A heapq loop does a fraction of a hop's work per event; the naive model, more.
    assert figures["sitssim_vs_heapq"] < figures["sitssim_vs_bare"] < 1
    assert figures["sitssim_vs_naive"] > 1
    assert figures["latency_match"] is True


def test_the_table_replaces_only_the_marked_section_and_lists_every_figure(quick_run) -> None:
    _, out, docs = quick_run
    results = json.loads(out.read_text())
    shipped = (ROOT / "docs" / "performance.md").read_text()
    written = docs.read_text()
    head, _, tail = shipped.partition("<!-- benchmarks:begin -->")
    assert written.startswith(head + "<!-- benchmarks:begin -->")
    assert written.endswith(
        "<!-- benchmarks:end -->" + tail.partition("<!-- benchmarks:end -->")[2]
    )
    table = written.partition("<!-- benchmarks:begin -->")[2].partition("<!-- benchmarks:end -->")[
        0
    ]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    figures = [(n, t["figure"]) for n, b in results["benchmarks"].items() for t in b["targets"]]
    assert len(rows) == 1 + len(figures)
    for (name, figure), row in zip(figures, rows[1:], strict=True):
        assert row.startswith(f"| {name} | {figure} | ")
    assert "in quick mode" in written


def test_only_runs_the_benchmarks_named(tmp_path: Path) -> None:
    proc, out, _ = _suite(tmp_path, "--only", "phy")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(json.loads(out.read_text())["benchmarks"]) == {"phy"}


def test_a_docs_file_without_the_markers_is_refused_unchanged(
    suite_module: ModuleType, tmp_path: Path
) -> None:
    doc = tmp_path / "other.md"
    doc.write_text("# someone's notes\n")
    with pytest.raises(SystemExit, match="no <!-- benchmarks:begin -->"):
        suite_module.write_docs(doc, "| a | b |")
    assert doc.read_text() == "# someone's notes\n"
